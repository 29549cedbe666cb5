"""The alerts' options: the webhooks told when an account needs a person, and desktop
notifications."""

from __future__ import annotations

from kirod.config.option import Kind, Option

ALERTS: tuple[Option, ...] = (
    Option(
        "alerts_webhooks",
        Kind.WEBHOOKS,
        "Webhooks told when an account needs a person (suspended, needs login or a profile, "
        "disabled, exhausted), when no account is usable, and when that is over: "
        "[[alerts.webhook]] tables with a url and an optional secret (the body's HMAC-SHA256 "
        "in X-Kirod-Signature), or a JSON list of such objects in the environment and on the "
        "command line.",
        (),
        secret=True,
    ),
    Option(
        "alerts_desktop",
        Kind.BOOL,
        "Also show those alerts as desktop notifications (notify-send on Linux, osascript on "
        "macOS) when kirod runs in a desktop session.",
        False,
    ),
)
