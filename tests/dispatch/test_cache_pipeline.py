"""The response cache in the account layer: the pipeline's order, eligibility, keys, recording."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from kirod.canonical.assemble import CanonicalCompletion
from kirod.canonical.catalog import STATIC_CATALOG, ModelInfo
from kirod.canonical.events import (
    BlockKind,
    BlockStart,
    BlockStop,
    CanonicalEvent,
    ErrorEvent,
    MessageStart,
    MessageStop,
    StopReason,
    TextDelta,
    Usage,
)
from kirod.canonical.request import (
    CanonicalRequest,
    ClientProtocol,
    ImageBlock,
    Message,
    Role,
    Sampling,
    ToolSpec,
)
from kirod.canonical.resolution import resolve
from kirod.dispatch.cache import (
    Lookup,
    ResponseCache,
    decode_events,
    eligible,
    encode_events,
    request_digest,
)
from kirod.dispatch.extensions import Extensions, Loaded
from kirod.errors import ErrorKind
from kirod.extension import Extension
from kirod.storage.cache import CacheStore
from kirod.storage.db import Database
from tests.support.pool_env import MODEL, TENANT, pool_env, request

ANSWER: list[CanonicalEvent] = [
    MessageStart("msg_1", MODEL, 3),
    BlockStart(0, BlockKind.TEXT),
    TextDelta(0, "Hello"),
    TextDelta(0, " world"),
    BlockStop(0),
    Usage(3, 2, credits=0.25),
    MessageStop(StopReason.END_TURN),
]


class Recorder(Extension):
    """Notes each hook call and how many chats the fake had seen by then."""

    def __init__(self, seen: list[tuple[str, ...]]) -> None:
        super().__init__({})
        self.seen = seen
        self.chats: Callable[[], int] = lambda: 0

    def on_request(self, request: CanonicalRequest) -> CanonicalRequest:
        self.seen.append(("on_request", str(self.chats())))
        return dataclasses.replace(request, system=("redacted",))

    def on_response(self, completion: CanonicalCompletion) -> None:
        self.seen.append(("on_response", str(self.chats())))


class RecordingCache(ResponseCache):
    """The real cache, noting each lookup: what it hashed and how many chats preceded it."""

    def __init__(self, store: CacheStore, seen: list[tuple[str, ...]], recorder: Recorder) -> None:
        super().__init__(store)
        self.seen = seen
        self.recorder = recorder

    async def lookup(
        self, request: CanonicalRequest, tenant: str, model: ModelInfo, model_name: str
    ) -> Lookup | None:
        found = await super().lookup(request, tenant, model, model_name)
        outcome = "none" if found is None else "miss" if found.events is None else "hit"
        self.seen.append(("cache", outcome, *request.system, str(self.recorder.chats())))
        return found


async def test_on_request_then_the_cache_then_routing(tmp_path: Path) -> None:
    seen: list[tuple[str, ...]] = []
    recorder = Recorder(seen)
    runner = Extensions([Loaded("recorder", "0.0.0", recorder, 1.0)])

    def cache(db: Database) -> ResponseCache:
        return RecordingCache(CacheStore(db, ttl_s=60.0, max_bytes=1 << 20), seen, recorder)

    async with pool_env(tmp_path, extensions=runner, cache=cache) as env:
        recorder.chats = lambda: len(env.fake.requests("chat"))
        await env.add_account()
        asked = request("hello", stream=False)
        for _ in range(2):
            async with env.dispatcher.open(asked, tenant=TENANT, cache=True) as dispatch:
                seen.append(("routed", dispatch.account_id or "-", str(recorder.chats())))
                [event async for batch in dispatch.events for event in batch]
            seen.append(("answered", dispatch.cache or "-"))
        assert seen == [
            ("on_request", "0"),
            ("cache", "miss", "redacted", "0"),  # the request as on_request left it
            ("routed", env.kirod_id(env.fake.requests("chat")[0].account_id), "1"),
            ("on_response", "1"),
            ("answered", "miss"),
            ("on_request", "1"),
            ("cache", "hit", "redacted", "1"),
            ("routed", "-", "1"),  # no account, no chat, no on_response
            ("answered", "hit"),
        ]
        miss, hit = sorted(await env.oplog.entries(), key=lambda row: row.at)
        assert (miss.cache, hit.cache) == ("miss", "hit")
        assert (hit.account_id, hit.credits, hit.attempts) == (None, None, ())
        assert miss.credits is not None


def test_only_a_whole_answer_to_a_plain_request_is_eligible() -> None:
    plain = request("hi", stream=False)
    assert eligible(plain)
    assert not eligible(dataclasses.replace(plain, stream=True))
    assert not eligible(dataclasses.replace(plain, tools=(ToolSpec("t", "", {}),)))
    image = Message(Role.USER, (ImageBlock("image/png", "AAAA"),))
    assert not eligible(dataclasses.replace(plain, messages=(image,)))


def test_the_key_is_the_resolved_request_not_its_envelope() -> None:
    sonnet = resolve(MODEL, STATIC_CATALOG).info
    base = request("hi", stream=False)
    digest = request_digest(base, sonnet)
    same = dataclasses.replace(
        base,
        request_id="req_other",
        protocol=ClientProtocol.OPENAI_CHAT,
        affinity_key="conversation",
        metadata={"user": "u"},
    )
    assert request_digest(same, sonnet) == digest
    assert request_digest(dataclasses.replace(base, sampling=Sampling(0.5)), sonnet) != digest
    assert request_digest(dataclasses.replace(base, system=("s",)), sonnet) != digest
    assert request_digest(base, resolve("claude-haiku-4-5", STATIC_CATALOG).info) != digest


def test_a_stored_answer_replays_joined_without_credits_under_a_new_id() -> None:
    body = encode_events(ANSWER)
    assert body is not None
    replayed = decode_events(body)
    start = replayed[0]
    assert isinstance(start, MessageStart)
    assert start.message_id != "msg_1"
    assert replayed[1:] == [
        BlockStart(0, BlockKind.TEXT),
        TextDelta(0, "Hello world"),
        BlockStop(0),
        Usage(3, 2),
        MessageStop(StopReason.END_TURN),
    ]


def test_failed_or_cut_answers_are_not_kept() -> None:
    assert encode_events(ANSWER[:-1]) is None  # the stream never ended
    cut = [*ANSWER[:-1], MessageStop(StopReason.MAX_TOKENS)]
    assert encode_events(cut) is None
    failed = [*ANSWER[:-2], ErrorEvent(ErrorKind.UPSTREAM, "gone")]
    assert encode_events(failed) is None


def test_text_that_is_no_valid_unicode_is_kept_as_it_came() -> None:
    odd = [*ANSWER[:2], TextDelta(0, "lone \ud800 surrogate"), *ANSWER[4:]]
    body = encode_events(odd)
    assert body is not None
    body.encode()  # ASCII: storable whatever the model said
    assert decode_events(body)[2] == TextDelta(0, "lone \ud800 surrogate")
