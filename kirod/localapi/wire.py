"""What the control API's server and kiroctl's client agree on besides the report types: the
versioned path prefix of every route, the error envelope (`{"error": {"code", "message"}}`)
that the server renders and the client reads back into a `ControlError`, and the headers by which
every answer states the daemon's version and its control API's revision (docs/RELEASING.md §4).

Stdlib-only, like the client that imports it.
"""

from __future__ import annotations

from typing import Any

PREFIX = "/localapi/v1"

VERSION_HEADER = "Kirod-Version"  # the daemon's `kirod.__version__`
API_HEADER = "Kirod-Api"  # API_REVISION of the daemon
# The control API's revision: raised when a route is added or a document gains a field kiroctl
# relies on. 0 is a kirod that sends no API_HEADER (every one before 0.47.0); 1 is the first that
# does, with the routes and documents of 0.47.0.
API_REVISION = 1


def error_body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}
