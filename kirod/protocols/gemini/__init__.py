"""The Gemini API codec (`/v1beta/models/*`, opt-in): generateContent, countTokens, models.

Talks only to `kirod.canonical`, never to another codec; the HTTP layer owns routing and auth.
"""

from kirod.protocols.gemini.affinity import conversation_key
from kirod.protocols.gemini.decode import DecodedGemini, decode_count_tokens, decode_generate
from kirod.protocols.gemini.encode import (
    ARRAY_END,
    GeminiStreamEncoder,
    array_frame,
    array_start,
    generate_json,
    sse_frame,
)
from kirod.protocols.gemini.models import compression_threshold, model_json

__all__ = [
    "ARRAY_END",
    "DecodedGemini",
    "GeminiStreamEncoder",
    "array_frame",
    "array_start",
    "compression_threshold",
    "conversation_key",
    "decode_count_tokens",
    "decode_generate",
    "generate_json",
    "model_json",
    "sse_frame",
]
