"""The web console's options: whether it is served, also on a remote host, and its sessions'
idle limit."""

from __future__ import annotations

from kirod.config.option import Kind, Option

CONSOLE: tuple[Option, ...] = (
    Option(
        "console",
        Kind.BOOL,
        "Serve the web console under /console/ (entered with `kiroctl console`).",
        True,
    ),
    Option(
        "console_remote",
        Kind.BOOL,
        "Also serve the console when allow_remote binds a non-loopback host (it then answers "
        "on that host's address too).",
        False,
    ),
    Option(
        "console_idle_s",
        Kind.FLOAT,
        "A console session ends after this long without a request (or a live page).",
        1800.0,
        minimum=60,
        maximum=86400,
    ),
)
