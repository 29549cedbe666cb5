"""The shared reader of a credential file's fields, and the account every parser assembles.

Every error is raised through `Record.fail`, so it names the kind of file and the field at fault,
and quotes only values that passed validation (regions, key names), never a token or secret.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import urlsplit

from kirod.credentials.regions import PROFILE_ARN, RegionError, api_region
from kirod.upstream.errors import CredentialImportError
from kirod.upstream.secrets import AuthKind, Credentials

ImportSource = Literal["kiro-ide", "kiro-cli", "opencode-kiro-auth", "api-key"]

DEFAULT_REGION = "us-east-1"
BUILDER_ID_START_URL = "https://view.awsapps.com/start"
# kiro.rs `validate_refresh_token`: Kiro refresh tokens run ~232 characters; shorter ones, or
# ones with an ellipsis, were cut when copied from a log or a UI.
MIN_REFRESH_TOKEN_LENGTH = 100

_REGION = re.compile(r"[a-z]{2}(?:-[a-z]+)+-\d{1,2}")
_PROFILE_ARN = PROFILE_ARN
_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})  # a local IdP (tests, dev)
_EXTRA_FRACTION = re.compile(r"(\.\d{6})\d+")  # kiro-cli writes nanoseconds

_KIND_NAMES = {
    AuthKind.SOCIAL: "Social login",
    AuthKind.BUILDER_ID: "Builder ID",
    AuthKind.IDC: "IAM Identity Center",
    AuthKind.EXTERNAL_IDP: "External IdP",
    AuthKind.API_KEY: "Kiro API key",
}
_SOCIAL_PROVIDERS = {"google": "Google", "github": "Github"}
OIDC_PROVIDERS = {AuthKind.BUILDER_ID: "BuilderId", AuthKind.IDC: "Enterprise"}


@dataclass(frozen=True)
class ImportedAccount:
    """An account read from another tool's files, ready to be stored. repr shows no secret."""

    label: str
    auth_kind: AuthKind
    region: str  # the Kiro API region
    auth_region: str  # the SSO OIDC region that refreshes the token (IdC, Builder ID)
    profile_arn: str | None
    credentials: Credentials
    source: ImportSource


class Record:
    """One JSON object or table row being read, named for error messages."""

    def __init__(self, data: Mapping[str, Any], where: str) -> None:
        self.data = data
        self.where = where

    def fail(self, problem: str) -> CredentialImportError:
        return CredentialImportError(f"{self.where}: {problem}")

    def text(self, name: str) -> str | None:
        value = self.data.get(name)
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise self.fail(f"{name} must be a string")
        return value

    def require(self, name: str) -> str:
        value = self.text(name)
        if value is None:
            raise self.fail(f"{name} is missing")
        return value

    def secret(self, name: str) -> str:
        """A token or client credential: it goes into HTTP headers and bodies verbatim."""
        value = self.require(name)
        if any(char.isspace() or not char.isprintable() for char in value):
            raise self.fail(f"{name} contains whitespace or control characters")
        return value

    def optional_secret(self, name: str) -> str | None:
        return None if self.text(name) is None else self.secret(name)

    def refresh_token(self, name: str, *, kiro_issued: bool = True, packed: bool = False) -> str:
        """Reject the truncated copies kiro.rs reports; external IdPs issue short tokens too.

        `packed`: older opencode-kiro-auth versions stored `refresh|clientId|…|method`.
        """
        value = self.secret(name)
        if packed:
            value = value.split("|", 1)[0]
        if "..." in value or (kiro_issued and len(value) < MIN_REFRESH_TOKEN_LENGTH):
            raise self.fail(
                f"{name} looks truncated ({len(value)} characters"
                f"{', with an ellipsis' if '...' in value else ''}); copy the whole file again"
            )
        return value

    def time(self, name: str) -> float | None:
        """An ISO-8601 time as epoch seconds; a time without an offset is taken as UTC."""
        value = self.text(name)
        if value is None:
            return None
        try:
            moment = datetime.fromisoformat(_EXTRA_FRACTION.sub(r"\1", value))
        except ValueError:
            raise self.fail(f"{name} is not an ISO-8601 time") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.timestamp()

    def epoch_ms(self, name: str) -> float | None:
        value = self.data.get(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise self.fail(f"{name} must be epoch milliseconds")
        return value / 1000

    def region(self, name: str) -> str | None:
        value = self.text(name)
        if value is not None and not _REGION.fullmatch(value):
            raise self.fail(f"{name} is not an AWS region name")
        return value

    def profile_arn(self, name: str) -> str | None:
        value = self.text(name)
        if value is not None and not _PROFILE_ARN.fullmatch(value):
            raise self.fail(
                f"{name} is not a CodeWhisperer profile ARN "
                f"(arn:aws:codewhisperer:<region>:<account>:profile/<id>)"
            )
        return value

    def scopes(self, name: str) -> tuple[str, ...]:
        """A scope list, or the space-separated string OAuth (and kiro-cli's external IdP) uses."""
        value = self.data.get(name)
        if value is None:
            return ()
        if isinstance(value, str):
            return tuple(value.split())
        if isinstance(value, list) and all(isinstance(scope, str) for scope in value):
            return tuple(value)
        raise self.fail(f"{name} must be a list of strings or a space-separated string")

    def https_url(self, name: str) -> str:
        value = self.require(name)
        parts = urlsplit(value)
        loopback = parts.scheme == "http" and parts.hostname in _LOOPBACK_HOSTS
        if (parts.scheme != "https" and not loopback) or not parts.hostname:
            raise self.fail(f"{name} must be an https URL")
        return value


def imported_account(
    kind: AuthKind,
    source: ImportSource,
    credentials: Credentials,
    profile_arn: str | None,
    auth_region: str,
    name: str | None = None,
) -> ImportedAccount:
    """Assemble the account; the API region is the profile's, which is where Kiro serves it, else
    the one serving `auth_region` (`kirod.credentials.regions`)."""
    try:
        region = api_region(profile_arn, auth_region)
    except RegionError as exc:
        raise CredentialImportError(f"{_KIND_NAMES[kind]} login ({source}): {exc}") from None
    return ImportedAccount(
        label=f"{name or _KIND_NAMES[kind]} ({source})",
        auth_kind=kind,
        region=region,
        auth_region=auth_region,
        profile_arn=profile_arn,
        credentials=credentials,
        source=source,
    )


def social_provider(provider: str | None) -> str | None:
    """Kiro IDE writes `Google`/`Github`, kiro-cli `google`/`github`; keep the IDE's spelling."""
    return _SOCIAL_PROVIDERS.get(provider.lower(), provider) if provider else None


def decode(content: str | bytes, where: str) -> str:
    if isinstance(content, str):
        return content
    try:
        return content.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise CredentialImportError(f"{where}: is not UTF-8 text") from None


def json_object(content: str | bytes, where: str) -> dict[str, Any]:
    text = decode(content, where)
    if not text.strip():
        raise CredentialImportError(f"{where}: is empty")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:  # the position only: exc.doc would quote the content
        raise CredentialImportError(
            f"{where}: is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
            f"the file may be truncated"
        ) from None
    if not isinstance(data, dict):
        raise CredentialImportError(f"{where}: is JSON but not an object")
    return data
