"""`RemoteFake`: drives a fake served by another process through its `/__fake__/` routes.

Standard library only and synchronous, so benchmarks and subprocess tests can use it anywhere.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import urllib.parse
from typing import Any

from kirod.testing.fake_kiro.admin import PREFIX
from kirod.testing.fake_kiro.catalog import Model
from kirod.testing.fake_kiro.drift import Drift
from kirod.testing.fake_kiro.script import Latency, Reply, Script
from kirod.testing.fake_kiro.tokens import DeviceFlow


class RemoteFakeError(RuntimeError):
    """The fake refused an admin call (bad input) or answered something unexpected."""


class RemoteFake:
    """The admin API of the fake at `base_url` (e.g. `http://127.0.0.1:8123`)."""

    def __init__(self, base_url: str, *, timeout_s: float = 10.0) -> None:
        url = urllib.parse.urlsplit(base_url)
        if url.scheme != "http" or url.hostname is None:
            raise ValueError(f"not an http:// URL: {base_url!r}")
        self._host = url.hostname
        self._port = url.port or 80
        self._timeout_s = timeout_s

    def enqueue(self, *items: Script | Reply, account_id: str | None = None) -> int:
        """Queue answers; return how many are pending in all queues."""
        scripts = [item if isinstance(item, Script) else Script(reply=item) for item in items]
        body = {"scripts": [script.to_json() for script in scripts], "account_id": account_id}
        return int(self._call("POST", "/scripts", body)["pending"])

    def clear_scripts(self) -> None:
        self._call("DELETE", "/scripts")

    def set_default_script(self, script: Script | None, *, account_id: str | None = None) -> None:
        """The answer when the queues are empty: for every account, or only for `account_id`
        (`FakeKiro.set_account_script`)."""
        body = {"script": script and script.to_json(), "account_id": account_id}
        self._call("PUT", "/default-script", body)

    def set_latency(self, latency: Latency) -> None:
        self._call("PUT", "/latency", dataclasses.asdict(latency))

    def configure(self, **settings: Any) -> None:
        """`rotate_refresh_tokens`, `access_ttl_s`, `models_page_size`."""
        self._call("PUT", "/settings", settings)

    def set_device_flow(self, flow: DeviceFlow) -> None:
        fields = dataclasses.asdict(flow)
        fields["outcome"] = flow.outcome.value
        self._call("PUT", "/device-flow", fields)

    def set_model(self, model: Model) -> None:
        self._call("PUT", "/models", dataclasses.asdict(model))

    def oversize(self, operation: str, nbytes: int) -> None:
        """Pad every answer of `operation` to about `nbytes` (0: normal answers again)."""
        self._call("PUT", "/oversize", {"operation": operation, "bytes": nbytes})

    def issue_account(self, kind: str = "social", **options: Any) -> dict[str, Any]:
        """Mint an account (`social`, `idc` or `api_key`); return its camelCase token set."""
        result: dict[str, Any] = self._call("POST", "/accounts", {"kind": kind, **options})
        return result

    def accounts(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/accounts")["accounts"])

    def set_usage(self, account_id: str, **fields: Any) -> dict[str, Any]:
        result: dict[str, Any] = self._call("PUT", "/usage", {"account_id": account_id, **fields})
        return result

    def suspend_account(self, account_id: str, suspended: bool = True) -> None:
        self._call("PUT", "/suspension", {"account_id": account_id, "suspended": suspended})

    def set_drifts(self, *drifts: Drift) -> None:
        self._call("PUT", "/drift", {"drifts": [drift.name for drift in drifts]})

    def set_listed_windows(self, account_id: str, listed: bool = True) -> None:
        self._call("PUT", "/listed-windows", {"account_id": account_id, "listed": listed})

    def gate_egress(self, account_id: str, gated: bool = True) -> None:
        self._call("PUT", "/egress", {"account_id": account_id, "gated": gated})

    def expire_access_token(self, access_token: str) -> None:
        self._call("POST", "/tokens/expire", {"access_token": access_token})

    def expire_account_tokens(self, account_id: str) -> None:
        self._call("POST", "/tokens/expire", {"account_id": account_id})

    def revoke_refresh_token(self, refresh_token: str) -> None:
        self._call("POST", "/tokens/revoke", {"refresh_token": refresh_token})

    def requests(self, operation: str | None = None) -> list[dict[str, Any]]:
        query = f"?{urllib.parse.urlencode({'operation': operation})}" if operation else ""
        return list(self._call("GET", f"/requests{query}")["requests"])

    def clear_requests(self) -> None:
        self._call("DELETE", "/requests")

    def counters(self) -> dict[str, int]:
        return dict(self._call("GET", "/counters"))

    def issued_secrets(self) -> list[str]:
        return list(self._call("GET", "/secrets")["secrets"])

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        connection = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout_s)
        try:
            payload = None if body is None else json.dumps(body).encode("utf-8")
            headers = {} if payload is None else {"Content-Type": "application/json"}
            connection.request(method, PREFIX + path, body=payload, headers=headers)
            response = connection.getresponse()
            data = response.read()
        finally:
            connection.close()
        if response.status != 200:
            raise RemoteFakeError(f"{method} {path}: {response.status} {data[:500]!r}")
        return json.loads(data)
