"""A webhook receiver on loopback for the end-to-end tests of alerts (not a test module)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Webhook:
    """A webhook receiver on 127.0.0.1 in a thread: records each POST and answers 204."""

    def __init__(self) -> None:
        self.received: list[tuple[dict[str, str], bytes]] = []
        lock = threading.Lock()
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with lock:
                    received.append((dict(self.headers), body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/kirod"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Webhook:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)

    def events(self) -> list[str]:
        return [json.loads(body)["event"] for _, body in self.received]

    def wait_for(self, *events: str, limit_s: float = 10.0) -> list[dict[str, Any]]:
        """Every body received, once each of `events` is among them."""
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            if all(event in self.events() for event in events):
                return [json.loads(body) for _, body in self.received]
            time.sleep(0.02)
        raise AssertionError(f"webhook got {self.events()}, not all of {events}")
