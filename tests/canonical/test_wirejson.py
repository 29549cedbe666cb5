"""`wirejson.dumps` writes the standard library's compact document, with or without orjson; and
`wirejson.loads` reads what the standard library reads."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kirod.canonical import wirejson

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.text(alphabet=st.characters(exclude_categories=["Cs"])),
)
DOCUMENTS = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@given(DOCUMENTS)
def test_same_bytes_as_the_standard_library(value: Any) -> None:
    assert wirejson.dumps(value) == wirejson._stdlib_dumps(value)
    assert json.loads(wirejson.dumps(value)) == value


@pytest.mark.parametrize(
    "value",
    [
        {"big": 2**70},  # beyond orjson's 64-bit integers
        {"escapes": 'quote " backslash \\ newline \n tab \t nul \x00 del \x7f \u2028 é 😀'},
        [1.5, 0.1, -2.0],
    ],
)
def test_values_orjson_refuses_or_spells_alike(value: Any) -> None:
    assert json.loads(wirejson.dumps(value)) == value


def test_what_neither_can_encode_still_fails() -> None:
    with pytest.raises((TypeError, UnicodeEncodeError)):
        wirejson.dumps({"lone": "\ud800"})


@given(DOCUMENTS)
def test_loads_reads_what_the_standard_library_reads(value: Any) -> None:
    data = json.dumps(value).encode()
    assert wirejson.loads(data) == json.loads(data)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b'{"lone": "\\ud800"}', {"lone": "\ud800"}),  # orjson refuses, the stdlib keeps it
        (b'{"n": NaN}', None),  # NaN is not equal to itself: checked below
        (b'{"pair": "\\ud83d\\ude00"}', {"pair": "\U0001f600"}),
    ],
)
def test_loads_falls_back_for_what_orjson_refuses(data: bytes, expected: Any) -> None:
    value = wirejson.loads(data)
    if expected is None:
        assert value["n"] != value["n"]
    else:
        assert value == expected


@pytest.mark.parametrize("data", [b"{", b"\xff", b'{"a": 1} x', b""])
def test_loads_rejects_what_the_standard_library_rejects(data: bytes) -> None:
    expected: type[ValueError] = ValueError
    try:
        json.loads(data.decode("utf-8"))
    except ValueError as exc:
        expected = type(exc)  # JSONDecodeError, or UnicodeDecodeError for bad UTF-8
    else:
        pytest.fail("the standard library accepted it")
    with pytest.raises(expected):
        wirejson.loads(data)
