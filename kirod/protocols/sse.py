"""Server-sent events framing, shared by every streaming codec."""

from __future__ import annotations

from typing import Any

from kirod.canonical import wirejson


def encode_event(data: Any, event: str | None = None) -> bytes:
    """One SSE event: an optional `event:` line and a compact single-line JSON `data:` line."""
    head = b"event: " + event.encode() + b"\ndata: " if event else b"data: "
    return head + wirejson.dumps(data) + b"\n\n"


def encode_raw(data: str, event: str | None = None) -> bytes:
    """An event whose data is not JSON, such as OpenAI's terminal `[DONE]`."""
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {data}\n\n".encode()


COMMENT_KEEPALIVE = b": keep-alive\n\n"
