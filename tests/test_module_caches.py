"""Each module-level cache answers what computing afresh answers (bench/README.md: its gain)."""

from __future__ import annotations

import hashlib
import json
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from kirod.daemon import logging as daemon_logging
from kirod.testing.fake_kiro.eventstream import encode_message
from kirod.upstream import client, frames


@given(st.text(max_size=40))
def test_machine_id_is_the_digest_it_caches(account_id: str) -> None:
    expected = hashlib.sha256(f"kirod/{account_id}".encode()).hexdigest()
    assert client.machine_id(account_id) == expected
    assert client.machine_id(account_id) == expected


@given(st.integers(0, 2**33))
def test_the_log_timestamp_is_strftime_of_its_second(second: int) -> None:
    expected = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
    assert daemon_logging._second(second) == expected
    assert daemon_logging._second(second) == expected


@settings(max_examples=100)
@given(
    st.dictionaries(
        st.text(min_size=1, max_size=12).filter(lambda n: len(n.encode()) < 256),
        st.text(max_size=30),
        max_size=2,
    ),
    st.text(max_size=20),
    # Within 64 bits: beyond them orjson reads an integer as a float (wirejson's documented
    # difference, which Kiro's counts never reach).
    st.lists(
        st.dictionaries(st.text(max_size=5), st.integers(-(2**63), 2**64 - 1)),
        min_size=1,
        max_size=3,
    ),
)
def test_a_remembered_header_block_decodes_as_botocore_reads_it(
    extra: dict[str, str], event_type: str, payloads: list[dict[str, int]]
) -> None:
    """The first frame fills the cache, the next ones hit it; botocore agrees with every one."""
    headers = {**extra, ":message-type": "event", ":event-type": event_type}
    frames._KNOWN_KINDS.clear()
    for payload in payloads:
        data = encode_message(dict(headers), json.dumps(payload).encode())
        parsed, body = frames._parse_with_botocore(data)
        expected = frames.Frame(
            "event", event_type=str(parsed[":event-type"]), payload=json.loads(body)
        )
        assert frames.FrameDecoder().feed(data) == [expected]
    assert len(frames._KNOWN_KINDS) == 1
