"""The extensions' option: which extensions are enabled, each with its own options."""

from __future__ import annotations

from kirod.config.option import Kind, Option

EXTENSIONS: tuple[Option, ...] = (
    Option(
        "extensions",
        Kind.EXTENSIONS,
        "Extensions to enable, by their entry-point name (group kirod.extensions): one "
        "[extensions.NAME] table each, holding that extension's own options and an optional "
        "timeout_s for each hook call; a JSON object of such tables in the environment and on "
        "the command line.",
        {},
        secret=True,
    ),
)
