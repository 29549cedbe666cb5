"""Read the credentials other Kiro tools saved, so an account joins kirod without a new login.

kiroctl uploads the files through the control API, so every parser takes a file's content, never
a path; nothing here touches the network, kirod's store or the user's own files. One module per
format, each naming the sources its shapes come from: `kiro_ide` (Kiro IDE's
kiro-auth-token.json), `kiro_cli` (kiro-cli's data.sqlite3), `opencode` (opencode-kiro-auth's
kiro.db or kiro-accounts.json) and `api_key` (a `ksk_…` key). `detect` recognises an upload by its
content; `record` and `sqlite` are the readers they share.

Every error is a `CredentialImportError` naming the kind of file and the field at fault. Messages
quote only values that passed validation (regions, key names), never a token or secret.
"""

from kirod.credentials.importers.api_key import parse_api_key
from kirod.credentials.importers.detect import detect_and_parse, parse_upload
from kirod.credentials.importers.kiro_cli import parse_kiro_cli
from kirod.credentials.importers.kiro_ide import parse_kiro_ide
from kirod.credentials.importers.opencode import parse_opencode_kiro_auth
from kirod.credentials.importers.record import (
    BUILDER_ID_START_URL,
    DEFAULT_REGION,
    MIN_REFRESH_TOKEN_LENGTH,
    ImportedAccount,
    ImportSource,
)
from kirod.credentials.importers.sqlite import SQLITE_MAGIC, ImportLimits

__all__ = [
    "BUILDER_ID_START_URL",
    "DEFAULT_REGION",
    "MIN_REFRESH_TOKEN_LENGTH",
    "SQLITE_MAGIC",
    "ImportLimits",
    "ImportSource",
    "ImportedAccount",
    "detect_and_parse",
    "parse_api_key",
    "parse_kiro_cli",
    "parse_kiro_ide",
    "parse_opencode_kiro_auth",
    "parse_upload",
]
