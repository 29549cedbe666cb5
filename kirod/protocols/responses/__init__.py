"""The OpenAI Responses codec (`/v1/responses`): decode to canonical, encode canonical events.

Talks only to `kirod.canonical`; the HTTP layer owns routing, storage and dispatch.
"""

from kirod.protocols.responses.decode import DecodedResponses, decode_responses
from kirod.protocols.responses.encode import ResponsesStreamEncoder
from kirod.protocols.responses.reasoning import ReasoningBox
from kirod.protocols.responses.response import ResponseEcho, response_items, response_json
from kirod.protocols.responses.tools import flat_tool_name

__all__ = [
    "DecodedResponses",
    "ReasoningBox",
    "ResponseEcho",
    "ResponsesStreamEncoder",
    "decode_responses",
    "flat_tool_name",
    "response_items",
    "response_json",
]
