"""The Anthropic Messages codec: `decode` requests, `encode` answers, `signatures` for thinking."""

from kirod.protocols.anthropic.decode import decode_count_tokens, decode_messages
from kirod.protocols.anthropic.encode import MessagesStreamEncoder, message_json
from kirod.protocols.anthropic.signatures import ThinkingSigner, VerifiedSignature

__all__ = [
    "MessagesStreamEncoder",
    "ThinkingSigner",
    "VerifiedSignature",
    "decode_count_tokens",
    "decode_messages",
    "message_json",
]
