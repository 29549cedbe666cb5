"""The upstream's options: the stream's idle deadline, connection reuse, the proxy and extra CAs,
and the endpoints of Kiro and its logins."""

from __future__ import annotations

from kirod.config.option import Kind, Option

STREAM: tuple[Option, ...] = (
    Option(
        "stream_idle_timeout_s",
        Kind.FLOAT,
        "Longest silence tolerated from the upstream stream.",
        120.0,
        minimum=1,
    ),
)

KEEP_ALIVE: tuple[Option, ...] = (
    Option(
        "upstream_keep_alive",
        Kind.BOOL,
        "Reuse upstream connections, each account its own (off: a new connection per request). "
        "A request whose reused connection the server had just closed is sent once more on a "
        "new one, never once an answer began.",
        True,
    ),
    Option(
        "upstream_keep_alive_timeout_s",
        Kind.FLOAT,
        "How long an idle upstream connection stays reusable. Keep it under the idle timeout of "
        "Kiro and of every proxy on the way (AWS load balancers: 60 s; many proxies: 30 s).",
        15.0,
        minimum=1,
        maximum=300,
    ),
)

ROUTE: tuple[Option, ...] = (
    Option(
        "proxy_url",
        Kind.URL,
        "HTTP(S) proxy for every upstream call.",
        None,
        optional=True,
        secret=True,
    ),
    Option(
        "ca_file",
        Kind.PATH,
        "PEM file of extra CA certificates to trust for Kiro and HTTPS proxies (a company CA, "
        "a TLS-inspecting proxy), besides the system's.",
        None,
        optional=True,
    ),
)

ENDPOINTS: tuple[Option, ...] = (
    Option(
        "kiro_endpoint",
        Kind.STR,
        "Kiro API endpoint template.",
        "https://q.{region}.amazonaws.com",
    ),
    Option(
        "kiro_auth_endpoint",
        Kind.STR,
        "Kiro social-login auth endpoint template.",
        "https://prod.{region}.auth.desktop.kiro.dev",
    ),
    Option(
        "oidc_endpoint",
        Kind.STR,
        "AWS SSO OIDC endpoint template.",
        "https://oidc.{region}.amazonaws.com",
    ),
)
