"""The ASCII fast path and the memo of long texts give exactly the regex method's counts."""

from __future__ import annotations

import string
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from kirod.canonical import token_count as tokens
from kirod.canonical.token_count import estimate_text_tokens


def reference(text: str) -> int:
    """The documented method, straight from the class patterns."""
    if not text:
        return 0
    tenths = sum(weight * len(pattern.findall(text)) for pattern, weight in tokens._CLASSES)
    return max(1, (tenths + 5) // 10)


RUNS = st.sampled_from(
    [
        "a",
        "Z",
        "word",
        "x" * 9,
        "y" * 10,
        "z" * 11,
        "q" * 25,
        "7",
        "12",
        "123",
        "1234",
        "9" * 7,
        "!",
        "->",
        '":[',
        "}}}}",
        "{" * 7,
        " ",
        "  ",
        "\n",
        "\n\n",
        "\t",
        "\r\n",
        "_",
        "\x00",
        "\x7f",
    ]
)


@settings(max_examples=400)
@given(st.lists(RUNS, max_size=60).map("".join))
def test_ascii_runs_match_the_regex_method(text: str) -> None:
    assert estimate_text_tokens(text) == reference(text)


@settings(max_examples=300)
@given(st.text(alphabet=string.printable + "\x00\x7f", max_size=400))
def test_any_ascii_matches_the_regex_method(text: str) -> None:
    assert estimate_text_tokens(text) == reference(text)


@settings(max_examples=200)
@given(st.text(max_size=300))
def test_any_text_matches_the_regex_method(text: str) -> None:
    assert estimate_text_tokens(text) == reference(text)


def test_long_texts_are_memoized_and_still_exact() -> None:
    text = "The daemon keeps one connection pool per account. 42 -> {ok}\n" * 40
    assert len(text) >= tokens._MEMO_MIN_CHARS
    assert estimate_text_tokens(text) == reference(text)
    assert estimate_text_tokens(text) == reference(text)  # from the memo
    non_ascii = "Größe → 大きさ, " * 40
    assert estimate_text_tokens(non_ascii) == reference(non_ascii)


def test_the_memo_stays_within_its_budget() -> None:
    memo = tokens._Memo(max_bytes=1_000)
    texts = [f"{n:04d} " + "abc " * 100 for n in range(10)]  # 405 characters, 454 bytes each
    for text in texts:
        assert memo.get(text) == reference(text)
    assert memo._bytes <= 1_000
    assert sum(sys.getsizeof(text) for text in memo._entries) == memo._bytes
    assert list(memo._entries) == texts[-2:]
    assert memo.get(texts[-2]) == reference(texts[-2])  # a hit moves it to the newest end
    assert list(memo._entries) == [texts[-1], texts[-2]]
    huge = "x" * 2_000
    assert memo.get(huge) == reference(huge)
    assert huge not in memo._entries
    assert memo._bytes <= 1_000
    wide = "大" * 300  # 300 characters, but 2 bytes each: only one fits
    memo.get(wide)
    memo.get(wide + "き")
    assert list(memo._entries) == [wide + "き"]


def test_json_with_a_lone_surrogate_is_still_estimated() -> None:
    assert tokens.estimate_json_tokens({"path": "a\ud800b"}) > 0
