"""`wirejson.dumps` writes the standard library's compact document, with or without orjson."""

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
