"""A Kiro API key `ksk_…` (docs/KIRO-PROTOCOL.md §5.8)."""

from __future__ import annotations

import re

from kirod.credentials.importers.record import (
    DEFAULT_REGION,
    ImportedAccount,
    decode,
    imported_account,
)
from kirod.upstream.errors import CredentialImportError
from kirod.upstream.secrets import AuthKind, Credentials

_API_KEY_FILE = "Kiro API key"

# No published format: the prefix is what every peer checks; the alphabet is the widest one a
# peer accepts (`[A-Za-z0-9._~+/=:-]`), and the lengths only reject the obviously cut or bogus.
_API_KEY = re.compile(r"ksk_[A-Za-z0-9._~+/=:-]{20,1024}")


def parse_api_key(text: str | bytes) -> ImportedAccount:
    """A headless `ksk_…` key: sent as the bearer itself, never refreshed."""
    key = decode(text, _API_KEY_FILE).strip()
    if not key.startswith("ksk_"):
        raise CredentialImportError(f"{_API_KEY_FILE}: does not start with ksk_")
    if not _API_KEY.fullmatch(key):
        raise CredentialImportError(
            f"{_API_KEY_FILE}: expected ksk_ followed by 20 to 1024 letters, digits or ._~+/=:- "
            f"characters ({len(key)} characters given, on one line)"
        )
    credentials = Credentials(access_token=key)
    return imported_account(AuthKind.API_KEY, "api-key", credentials, None, DEFAULT_REGION)
