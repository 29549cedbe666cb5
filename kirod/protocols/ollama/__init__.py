"""The Ollama codec (`/api/*`, opt-in): chat, and the model descriptions its clients discover.

Talks only to `kirod.canonical`, never to another codec; the HTTP layer owns routing and auth.
"""

from kirod.protocols.ollama.decode import decode_ollama_chat, decode_show, requested_model
from kirod.protocols.ollama.encode import OllamaStreamEncoder, Timing, ollama_chat_json
from kirod.protocols.ollama.models import VERSION, show_json, tags_entry

__all__ = [
    "VERSION",
    "OllamaStreamEncoder",
    "Timing",
    "decode_ollama_chat",
    "decode_show",
    "ollama_chat_json",
    "requested_model",
    "show_json",
    "tags_entry",
]
