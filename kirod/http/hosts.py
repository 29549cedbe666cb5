"""The public API's `Host` check, inside the ingress (so a refusal has a request id, an access-log
line and its API's envelope) and before CORS and the key gate: a page on a rebound domain is
refused whatever it sends. Which values pass is `kirod.config.hosts.ApiHosts`; paths with their
own rule are left to it (`/health` stays open, the console has its guard)."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import hdrs, web
from aiohttp.typedefs import Middleware

from kirod.config.hosts import ApiHosts
from kirod.errors import ApiError, ErrorKind
from kirod.http.ingress import Handler

MAX_SHOWN_HOST = 100


def _local_address(request: web.Request) -> str | None:
    sockname = request.transport.get_extra_info("sockname") if request.transport else None
    return str(sockname[0]) if isinstance(sockname, tuple) and sockname else None


def refusal(host: str) -> ApiError:
    # ascii(): the header's characters escaped, as the message is read in logs and terminals.
    shown = ascii(host[:MAX_SHOWN_HOST])
    return ApiError(
        ErrorKind.PERMISSION,
        f"kirod does not answer to Host {shown}: call it by 127.0.0.1, localhost or [::1], or "
        "add the name to allowed_hosts (KIROD_ALLOWED_HOSTS), e.g. host.docker.internal for a "
        "client in a container",
        code="host_not_allowed",
        final=True,
    )


def make_host_check(hosts: ApiHosts, unchecked: Callable[[str], bool]) -> Middleware:
    """Refuse a request whose `Host` `hosts` does not admit, unless `unchecked(path)`."""

    @web.middleware
    async def host_check(request: web.Request, handler: Handler) -> web.StreamResponse:
        host = request.headers.get(hdrs.HOST)
        if (
            host is not None
            and not hosts.admits(host, _local_address(request))
            and not unchecked(request.path)
        ):
            raise refusal(host)
        return await handler(request)

    return host_check
