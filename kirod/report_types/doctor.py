"""What the daemon checks for `kiroctl doctor` (`GET /doctor`): its versions, what is wrong with
its settings, and whether each Kiro endpoint in use answers, through the proxy its accounts take.

The reachability of an endpoint is checked step by step, the first that fails named in `failed_at`:
`dns` (the host, or the proxy's), `connect` (TCP), `proxy` (the proxy refused the tunnel), `tls`
(the certificate), `timeout`, `http` (a broken answer). Any HTTP status means Kiro answered.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Reach:
    target: str  # "kiro" (the API) or "auth" (the token refresh)
    region: str
    url: str  # the endpoint's base URL
    proxy: str | None  # scheme://host:port of the proxy taken; never its credentials
    accounts: int  # how many accounts use it
    ok: bool
    ms: float  # how long the check took
    status: int | None = None  # the HTTP status that answered
    failed_at: str | None = None  # dns, connect, proxy, tls, timeout, http
    error: str | None = None  # a sentence, with what to do

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Reach:
        status, proxy = data.get("status"), data.get("proxy")
        return cls(
            target=str(data["target"]),
            region=str(data["region"]),
            url=str(data["url"]),
            proxy=None if proxy is None else str(proxy),
            accounts=int(data["accounts"]),
            ok=bool(data["ok"]),
            ms=float(data["ms"]),
            status=None if status is None else int(status),
            failed_at=None if data.get("failed_at") is None else str(data["failed_at"]),
            error=None if data.get("error") is None else str(data["error"]),
        )


@dataclass(frozen=True)
class Doctor:
    version: str
    python: str
    platform: str
    config: tuple[str, ...]  # what is wrong with the settings, each a sentence with its fix
    reach: tuple[Reach, ...]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Doctor:
        return cls(
            version=str(data["version"]),
            python=str(data["python"]),
            platform=str(data["platform"]),
            config=tuple(str(item) for item in data["config"]),
            reach=tuple(Reach.from_json(item) for item in data["reach"]),
        )
