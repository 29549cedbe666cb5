"""The token estimator: close to Claude's tokenizer on every kind of text, monotonic, and fast."""

from __future__ import annotations

import json
import time

import pytest

from kirod.canonical.token_count import estimate_json_tokens, estimate_text_tokens

PROSE = """\
The daemon keeps one connection pool per account and hands each request to the account that has
the most capacity left. When an account is throttled, its requests move to the next one, and the
client never notices: the stream it receives is the same, only a little later. Accounts that fail
repeatedly are parked for a while, then probed again before they take real traffic.
"""

CODE = '''\
async def refresh(self, account: Account, *, force: bool = False) -> Credentials:
    """Return fresh credentials, refreshing them at most once per account at a time."""
    async with self._locks[account.id]:
        creds = await self._store.load(account.id)
        if not force and creds.expires_at - time.time() > REFRESH_MARGIN_SECONDS:
            return creds
        token = await self._client.refresh_token(creds.refresh_token, region=account.region)
        updated = dataclasses.replace(creds, access_token=token.value, expires_at=token.expiry)
        await self._store.save(account.id, updated)
        return updated
'''

# Full-width commas are CJK punctuation, which the estimator must count as CJK.
CJK = "今天天气很好，我们去公园散步吧。春天来了，花园里的花都开了，孩子们在草地上奔跑。\n"  # noqa: RUF001

EDIT = {
    "path": "src/kirod/upstream/translate.py",
    "old_str": "def feed(self, frame: Frame) -> list[CanonicalEvent]:",
    "new_str": "def feed(self, frame):",
    "replace_all": False,
    "line": 382,
}

# Token counts of the samples under the last tokenizer Anthropic published.
REFERENCE_COUNTS = [(PROSE, 81), (CODE, 156), (CJK, 50)]


@pytest.mark.parametrize(("text", "reference"), REFERENCE_COUNTS)
def test_close_to_the_reference_tokenizer(text: str, reference: int) -> None:
    assert abs(estimate_text_tokens(text) - reference) <= 0.15 * reference


def test_json_is_counted_as_compact_unescaped_text() -> None:
    compact = json.dumps(EDIT, separators=(",", ":"))
    assert estimate_json_tokens(EDIT) == estimate_text_tokens(compact)
    assert abs(estimate_json_tokens(EDIT) - 57) <= 0.15 * 57
    assert estimate_json_tokens({"q": "天气"}) == estimate_text_tokens('{"q":"天气"}')
    assert estimate_json_tokens([]) == 1
    assert estimate_json_tokens(None) == 1


@pytest.mark.parametrize(
    ("text", "low", "high"),
    [
        (PROSE * 10, len(PROSE * 10) / 6, len(PROSE * 10) / 3),  # ~4 characters a token
        (CODE * 10, len(CODE * 10) / 6, len(CODE * 10) / 2.5),
        (CJK * 10, len(CJK * 10) * 0.8, len(CJK * 10) * 1.5),  # about a token a character
        ("Привет, как дела? " * 20, 80, 200),
        ("🎉" * 10, 10, 40),
    ],
)
def test_sanity_bounds(text: str, low: float, high: float) -> None:
    assert low <= estimate_text_tokens(text) <= high


def test_small_texts() -> None:
    assert estimate_text_tokens("") == 0
    assert estimate_text_tokens(" ") == 1
    assert estimate_text_tokens("Hello, world!") == 4
    assert estimate_text_tokens("internationalization") > estimate_text_tokens("nation")


@pytest.mark.parametrize("text", [PROSE, CODE, CJK, json.dumps(EDIT, ensure_ascii=False)])
def test_monotonic_and_nearly_additive(text: str) -> None:
    estimates = [estimate_text_tokens(text[:end]) for end in range(len(text) + 1)]
    assert estimates == sorted(estimates)
    for cut in range(len(text)):
        head, rest = text[:cut], text[cut:]
        whole = estimate_text_tokens(text)
        assert whole <= estimate_text_tokens(head) + estimate_text_tokens(rest) + 1


def test_fast_on_large_inputs() -> None:
    text = (PROSE + CODE + CJK) * 800  # about a megabyte
    started = time.perf_counter()
    estimate_text_tokens(text)
    assert time.perf_counter() - started < 2
