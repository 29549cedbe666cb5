"""One HTTP request to a daemon with exactly the headers a test gives, over `http.client`: for
what the SDKs would not send (a key in the URL, no key, a `Host` of the test's choosing)."""

from __future__ import annotations

import http.client
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from kirod.testing.daemon import DaemonProcess


class Answer:
    def __init__(self, response: http.client.HTTPResponse) -> None:
        self.status = response.status
        self.headers = response.headers
        self.body = response.read()

    def json(self) -> Any:
        return json.loads(self.body)


def send(
    proc: DaemonProcess,
    method: str,
    path: str,
    headers: Mapping[str, str],
    body: bytes | None = None,
) -> Answer:
    """One request with exactly these headers (`Host` too, when given)."""
    address = urlsplit(proc.base_url)
    assert address.hostname is not None
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=30)
    try:
        connection.putrequest(method, path, skip_host="Host" in headers)
        for name, value in headers.items():
            connection.putheader(name, value)
        if body is not None:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        return Answer(connection.getresponse())
    finally:
        connection.close()
