"""The decoder's own header parser agrees with botocore's wherever it answers at all."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kirod.testing.fake_kiro.eventstream import HeaderValue, encode_message
from kirod.upstream import frames

NAMES = st.text(min_size=0, max_size=20).filter(lambda n: len(n.encode()) < 256)
VALUES: st.SearchStrategy[HeaderValue] = st.one_of(
    st.text(max_size=60), st.binary(max_size=10), st.booleans(), st.integers(-(2**31), 2**31 - 1)
)


@settings(max_examples=300)
@given(st.dictionaries(NAMES, VALUES, max_size=6), st.binary(max_size=40))
def test_fast_parser_agrees_with_botocore(headers: dict[str, HeaderValue], payload: bytes) -> None:
    data = encode_message(headers, payload)
    fast = frames._parse_string_headers(data)
    reference = frames._parse_with_botocore(data)
    if all(isinstance(value, str) for value in headers.values()):
        assert fast == reference
    else:
        assert fast is None  # left to botocore, which knows every type


def test_string_headers_take_the_fast_path() -> None:
    data = encode_message({":message-type": "event", ":event-type": "x"}, b'{"a":1}')
    assert frames._parse_string_headers(data) == (
        {":message-type": "event", ":event-type": "x"},
        b'{"a":1}',
    )
