"""Thinking signatures: kirod's own blocks round-trip; altered and foreign ones never verify."""

from __future__ import annotations

import base64

import pytest

from kirod.protocols.anthropic.signatures import ThinkingSigner, VerifiedSignature

SECRET = b"per-install-secret-0123456789abcdef"
SIGNER = ThinkingSigner(SECRET)
UPSTREAM = "EqQBCkgIARABGAIiQL3+upstream/signature=="
THINKING = "The user wants the file read; call Read on a.txt."


@pytest.mark.parametrize("upstream", [UPSTREAM, None])
def test_round_trip_recovers_the_upstream_signature(upstream: str | None) -> None:
    signature = SIGNER.sign(THINKING, upstream)
    assert SIGNER.verify(THINKING, signature) == VerifiedSignature(upstream)


def test_format_is_versioned_base64url_with_the_upstream_signature_verbatim() -> None:
    signature = SIGNER.sign(THINKING, UPSTREAM)
    assert signature.startswith("kirod.t1.")
    mac, upstream = signature.removeprefix("kirod.t1.").split(".", 1)
    assert upstream == UPSTREAM
    assert len(mac) == 43
    assert len(base64.urlsafe_b64decode(mac + "=")) == 32
    assert SIGNER.sign(THINKING, None) == f"kirod.t1.{mac_of(THINKING, None)}"


def mac_of(thinking: str, upstream: str | None) -> str:
    return SIGNER.sign(thinking, upstream).removeprefix("kirod.t1.")[:43]


def test_empty_upstream_signature_means_none() -> None:
    assert SIGNER.sign(THINKING, "") == SIGNER.sign(THINKING, None)
    assert SIGNER.verify(THINKING, SIGNER.sign(THINKING, "")) == VerifiedSignature(None)


def test_signing_is_deterministic_and_binds_both_inputs() -> None:
    assert SIGNER.sign(THINKING, UPSTREAM) == SIGNER.sign(THINKING, UPSTREAM)
    assert mac_of(THINKING, UPSTREAM) != mac_of(THINKING, None)
    assert mac_of(THINKING, UPSTREAM) != mac_of(THINKING + " ", UPSTREAM)
    # Length-prefixing the text: moving a character across the boundary changes the MAC.
    assert mac_of("ab", "c") != mac_of("a", "bc")


def tampered() -> list[tuple[str, str]]:
    good = SIGNER.sign(THINKING, UPSTREAM)
    mac = mac_of(THINKING, UPSTREAM)
    flipped = ("A" if mac[0] != "A" else "B") + mac[1:]
    return [
        ("altered thinking", SIGNER.sign(THINKING + ".", UPSTREAM)),
        ("swapped upstream signature", good.replace(UPSTREAM, UPSTREAM[:-3] + "xx==")),
        ("upstream signature removed", good[: -len(UPSTREAM) - 1]),
        ("upstream signature added", SIGNER.sign(THINKING, None) + "." + UPSTREAM),
        ("mac flipped", f"kirod.t1.{flipped}.{UPSTREAM}"),
        ("mac truncated", good[:20]),
        ("empty upstream part", f"kirod.t1.{mac}."),
        ("other secret", ThinkingSigner(b"another-install-secret-000000").sign(THINKING, UPSTREAM)),
        ("future version", good.replace("kirod.t1.", "kirod.t2.")),
        (
            "anthropic signature",
            "EuYBCkQYAiJAgCs1le6/Pol5Z4/JMomVOouGrWdhYNsH3ukzUECbB6iWrSQtsQuRHJ",
        ),
        ("empty", ""),
        ("non-ascii", "kirod.t1." + "é" * 43),
        ("redacted wrapper", SIGNER.wrap_redacted(UPSTREAM).replace("kirod.r1.", "kirod.t1.")),
    ]


@pytest.mark.parametrize(("case", "signature"), tampered(), ids=[c for c, _ in tampered()])
def test_altered_and_foreign_signatures_do_not_verify(case: str, signature: str) -> None:
    thinking = "" if case == "redacted wrapper" else THINKING
    assert SIGNER.verify(thinking, signature) is None


def test_lone_surrogates_sign_and_verify() -> None:
    text = "broken \ud800 pair"
    assert SIGNER.verify(text, SIGNER.sign(text, None)) == VerifiedSignature(None)


def test_redacted_data_round_trip() -> None:
    data = "gAAAAABo-opaque+reasoning/blob=="
    wrapped = SIGNER.wrap_redacted(data)
    assert wrapped.startswith("kirod.r1.")
    assert wrapped.endswith("." + data)
    assert SIGNER.unwrap_redacted(wrapped) == data


@pytest.mark.parametrize(
    "wrapped",
    [
        SIGNER.wrap_redacted("blob").replace("blob", "blob2"),
        ThinkingSigner(b"another-install-secret-000000").wrap_redacted("blob"),
        SIGNER.wrap_redacted("blob").removesuffix(".blob"),
        SIGNER.sign("", "blob").replace("kirod.t1.", "kirod.r1."),
        "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP",
        "",
    ],
    ids=["altered", "other-secret", "no-data", "thinking-signature", "anthropic", "empty"],
)
def test_foreign_or_altered_redacted_data_is_refused(wrapped: str) -> None:
    assert SIGNER.unwrap_redacted(wrapped) is None


def test_short_secrets_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 16 bytes"):
        ThinkingSigner(b"short")
