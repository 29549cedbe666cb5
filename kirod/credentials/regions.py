"""Which Kiro API region serves an account (docs/UPSTREAM.md §5.1).

Kiro's API answers only at `q.us-east-1` and `q.eu-central-1`. An account's API region is its
profile ARN's region when it has one; otherwise it follows its SSO / auth region by AWS's
partition map (kiro-cli's resolver as `mikeyobrien/pi-provider-kiro` mirrors it): the Americas and
Asia-Pacific go to us-east-1, Europe to eu-central-1. A region outside the map is refused when
the account is imported, naming it, instead of failing later as a DNS error.
"""

from __future__ import annotations

import re

DEFAULT_API_REGION = "us-east-1"
API_REGIONS = ("us-east-1", "eu-central-1")
"""The regions with a Kiro API host; discovery probes them in this order."""

_REGION = r"[a-z]{2}(?:-[a-z]+)+-\d{1,2}"
PROFILE_ARN = re.compile(
    rf"arn:aws:codewhisperer:(?P<region>{_REGION}):\d{{12}}:profile/[A-Za-z0-9_-]+"
)
"""`arn:aws:codewhisperer:<region>:<12 digits>:profile/<id>` (docs/UPSTREAM.md §5.2)."""

_MAPPED = {
    "us-east-1": "us-east-1",
    "us-east-2": "us-east-1",
    "us-west-1": "us-east-1",
    "us-west-2": "us-east-1",
    "sa-east-1": "us-east-1",
    "eu-central-1": "eu-central-1",
}


class RegionError(ValueError):
    """A region Kiro's API does not serve; the message names it."""


def profile_region(profile_arn: str) -> str | None:
    match = PROFILE_ARN.fullmatch(profile_arn)
    return match["region"] if match else None


def mapped_api_region(auth_region: str) -> str:
    """The API region that serves logins of `auth_region` (the SSO / IdC region)."""
    if auth_region in _MAPPED:
        return _MAPPED[auth_region]
    if auth_region.startswith(("us-", "ap-")) and not auth_region.startswith("us-gov-"):
        return "us-east-1"
    if auth_region.startswith("eu-"):
        return "eu-central-1"
    raise RegionError(
        f"region {auth_region} has no Kiro API host (Kiro serves {' and '.join(API_REGIONS)})"
    )


def api_region(profile_arn: str | None, auth_region: str | None) -> str:
    """The profile's region, else the auth region's mapped one, else us-east-1."""
    if profile_arn:
        region = profile_region(profile_arn)
        if region is None:
            raise RegionError(
                "the profile ARN is not arn:aws:codewhisperer:<region>:<account>:profile/<id>"
            )
        if region not in API_REGIONS:
            raise RegionError(
                f"the profile ARN's region {region} has no Kiro API host "
                f"(Kiro serves {' and '.join(API_REGIONS)})"
            )
        return region
    return mapped_api_region(auth_region) if auth_region else DEFAULT_API_REGION


def other_regions(first: str) -> tuple[str, ...]:
    """`first`, then the other API regions: the order profile discovery probes."""
    return (first, *(region for region in API_REGIONS if region != first))
