"""The per-install secret: 32 random bytes in the state dir (0600), created on first start.

Purpose-specific keys are derived from it (HMAC-SHA256 of a label), so a key used to sign
thinking blocks is never the one that encrypts reasoning.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from pathlib import Path

from kirod.errors import StartupError
from kirod.paths import write_private

KEY_BYTES = 32


def load_or_create(path: Path) -> bytes:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        data = b""
    except OSError as exc:
        raise StartupError(f"cannot read the install key {path}: {exc.strerror}") from None
    if len(data) == KEY_BYTES:
        return data
    if data:
        raise StartupError(f"the install key {path} is damaged; remove it to create a new one")
    data = secrets.token_bytes(KEY_BYTES)
    try:
        write_private(path, data)
    except OSError as exc:
        raise StartupError(f"cannot create the install key {path}: {exc.strerror}") from None
    return data


def derive(secret: bytes, purpose: str) -> bytes:
    return hmac.new(secret, purpose.encode(), hashlib.sha256).digest()
