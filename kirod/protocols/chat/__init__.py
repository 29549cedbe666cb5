"""The OpenAI Chat Completions codec (`/v1/chat/completions`, opt-in legacy API).

Talks only to `kirod.canonical`, never to the Responses codec; the HTTP layer owns routing.
"""

from kirod.protocols.chat.decode import DecodedChat, decode_chat
from kirod.protocols.chat.encode import ChatStreamEncoder, chat_completion_json

__all__ = ["ChatStreamEncoder", "DecodedChat", "chat_completion_json", "decode_chat"]
