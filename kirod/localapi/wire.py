"""What the control API's server and kiroctl's client agree on besides the report types: the
versioned path prefix of every route, and the error envelope (`{"error": {"code", "message"}}`)
that the server renders and the client reads back into a `ControlError`.

Stdlib-only, like the client that imports it.
"""

from __future__ import annotations

from typing import Any

PREFIX = "/localapi/v1"


def error_body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}
