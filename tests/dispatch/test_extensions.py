"""The extension runner: priority order, the time bound, fail and skip, the event grammar's
rules, the completion and error hooks, loading from entry points with option schemas, and the
dispatcher's seam (the model scope judged again after `on_request`, the operation log)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncIterator, Sequence
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

from kirod.canonical.assemble import CanonicalCompletion
from kirod.canonical.catalog import ModelInfo
from kirod.canonical.events import (
    BlockKind,
    BlockStart,
    BlockStop,
    CanonicalEvent,
    ErrorEvent,
    MessageStart,
    MessageStop,
    StopReason,
    StreamValidator,
    TextDelta,
    Usage,
)
from kirod.canonical.request import CanonicalRequest, TextBlock
from kirod.config import load_settings
from kirod.dispatch.extensions import GROUP, Extensions, Loaded, load_extensions
from kirod.errors import ApiError, ConfigError, ErrorKind
from kirod.extension import Extension, OptionSpec, Produced
from kirod.log import FIELDS_ATTR

# The shipped examples, from the source tree (contrib/extensions) as an installer would find them.
from tests.support.examples import Redactor, Watermark
from tests.support.pool_env import MODEL, TENANT, pool_env, request

SECRET_TEXT = "the hook's secret detail"

STREAM: list[CanonicalEvent] = [
    MessageStart("msg_1", MODEL, 3),
    BlockStart(0, BlockKind.TEXT),
    TextDelta(0, "Hello"),
    TextDelta(0, " world"),
    BlockStop(0),
    Usage(3, 2),
    MessageStop(StopReason.END_TURN),
]


def loaded(extension: Extension, name: str, timeout_s: float = 1.0) -> Loaded:
    return Loaded(name, "0.0.0", extension, timeout_s)


class Tag(Extension):
    """Appends its tag to the system prompt: shows the order the hooks ran in."""

    def __init__(self, tag: str, priority: int) -> None:
        super().__init__({})
        self.tag = tag
        self.priority = priority  # type: ignore[misc]  # per instance, for the test

    async def on_request(self, request: CanonicalRequest) -> CanonicalRequest:
        return dataclasses.replace(request, system=(*request.system, self.tag))


class Raises(Extension):
    async def on_request(self, request: CanonicalRequest) -> CanonicalRequest:
        raise RuntimeError(SECRET_TEXT)


class RaisesAndSkips(Raises):
    on_failure = "skip"


class Slow(Extension):
    async def on_request(self, request: CanonicalRequest) -> CanonicalRequest:
        await asyncio.sleep(5)
        return request


class SlowAndSkips(Slow):
    on_failure = "skip"


class Waits(Extension):
    """Waits on the loop before it answers: the bound is armed, and the hook resumed in it."""

    async def on_request(self, request: CanonicalRequest) -> CanonicalRequest:
        await asyncio.sleep(0.01)
        await asyncio.sleep(0)
        return dataclasses.replace(request, system=("waited",))


class Renames(Extension):
    async def on_request(self, request: CanonicalRequest) -> CanonicalRequest:
        return dataclasses.replace(request, request_id="req_other")


class Reroutes(Extension):
    async def on_request(self, request: CanonicalRequest) -> CanonicalRequest:
        return dataclasses.replace(request, model="claude-opus-4-6")


class Same(Extension):
    async def on_request(self, request: CanonicalRequest) -> CanonicalRequest:
        return dataclasses.replace(request)  # an equal copy: not a change


class Upper(Extension):
    """Upper-cases text deltas and drops usage: both allowed."""

    async def on_stream_event(self, event: CanonicalEvent) -> Produced:
        if isinstance(event, TextDelta):
            return TextDelta(event.index, event.text.upper())
        if isinstance(event, Usage):
            return None
        return event


class DropsStops(Extension):
    async def on_stream_event(self, event: CanonicalEvent) -> Produced:
        return None if isinstance(event, BlockStop) else event


class DropsStopsAndSkips(DropsStops):
    on_failure = "skip"


class Appends(Extension):
    async def on_stream_event(self, event: CanonicalEvent) -> Produced:
        if isinstance(event, BlockStop):
            return [TextDelta(event.index, "!"), event]
        return event


class AppendsAfterStop(Extension):
    async def on_stream_event(self, event: CanonicalEvent) -> Produced:
        if isinstance(event, BlockStop):
            return [event, TextDelta(event.index, "!")]  # the block is closed by then
        return event


class Observes(Extension):
    on_failure = "skip"

    def __init__(self) -> None:
        super().__init__({})
        self.completions: list[CanonicalCompletion] = []
        self.errors: list[ApiError] = []

    async def on_response(self, completion: CanonicalCompletion) -> None:
        self.completions.append(completion)

    async def on_error(self, error: ApiError) -> None:
        self.errors.append(error)
        raise RuntimeError(SECRET_TEXT)  # never replaces the error it observed


class RejectsResponses(Extension):
    async def on_response(self, completion: CanonicalCompletion) -> None:
        raise ValueError(SECRET_TEXT)


async def batches(events: Sequence[CanonicalEvent]) -> AsyncIterator[list[CanonicalEvent]]:
    for event in events:
        yield [event]


async def through(runner: Extensions, events: Sequence[CanonicalEvent]) -> list[CanonicalEvent]:
    return [event async for batch in runner.events(batches(events)) for event in batch]


def valid(events: Sequence[CanonicalEvent]) -> list[CanonicalEvent]:
    validator = StreamValidator()
    for event in events:
        validator.feed(event)
    validator.finish()
    return list(events)


def failures(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [
        getattr(record, FIELDS_ATTR)
        for record in caplog.records
        if record.getMessage() == "extension_failed"
    ]


async def test_with_no_extension_the_stream_is_not_wrapped() -> None:
    stream = batches(STREAM)
    assert Extensions().events(stream) is stream
    assert not Extensions()
    # An extension with request hooks only leaves the stream alone too.
    assert Extensions([loaded(Tag("a", 1), "tag")]).events(stream) is stream


async def test_on_request_hooks_run_in_priority_order_and_are_named() -> None:
    runner = Extensions(
        [
            loaded(Tag("late", 50), "late"),
            loaded(Tag("early", 5), "early"),
            loaded(Same({}), "same"),
        ]
    )
    changed, by = await runner.request(request())
    assert changed.system == ("early", "late")
    assert by == ("early", "late")  # an equal copy changed nothing
    assert [item.name for item in runner.loaded] == ["early", "late", "same"]


@pytest.mark.parametrize("failing", [Raises, Slow])
async def test_a_failing_hook_fails_the_request_with_a_fixed_error(
    failing: type[Extension], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    runner = Extensions([loaded(failing({}), "broken", timeout_s=0.05), loaded(Tag("t", 200), "t")])
    with pytest.raises(ApiError) as raised:
        await runner.request(request())
    error = raised.value
    assert (error.kind, error.status, error.code) == (ErrorKind.INTERNAL, 500, "extension_failed")
    assert "broken" in error.message
    assert SECRET_TEXT not in error.message
    [logged] = failures(caplog)
    expected = "RuntimeError" if failing is Raises else "TimeoutError"
    assert (logged["extension"], logged["hook"], logged["error"]) == (
        "broken",
        "on_request",
        expected,
    )
    assert SECRET_TEXT not in caplog.text


@pytest.mark.parametrize("failing", [RaisesAndSkips, SlowAndSkips])
async def test_a_hook_that_skips_on_failure_leaves_the_request_as_it_was(
    failing: type[Extension],
) -> None:
    runner = Extensions([loaded(failing({}), "broken", timeout_s=0.05), loaded(Tag("t", 200), "t")])
    asked = request()
    changed, by = await runner.request(asked)
    assert by == ("t",)
    assert changed == dataclasses.replace(asked, system=("t",))


async def test_a_hook_that_waits_within_its_bound_is_resumed_to_its_answer() -> None:
    changed, by = await Extensions([loaded(Waits({}), "waits", timeout_s=1.0)]).request(request())
    assert (changed.system, by) == (("waited",), ("waits",))


async def test_on_request_may_not_change_the_requests_identity() -> None:
    with pytest.raises(ApiError, match="renames"):
        await Extensions([loaded(Renames({}), "renames")]).request(request())


async def test_stream_hooks_may_change_and_drop_deltas_and_usage() -> None:
    out = await through(Extensions([loaded(Upper({}), "upper")]), STREAM)
    assert valid(out) == [
        STREAM[0],
        STREAM[1],
        TextDelta(0, "HELLO"),
        TextDelta(0, " WORLD"),
        BlockStop(0),
        MessageStop(StopReason.END_TURN),
    ]


async def test_a_hook_may_put_a_delta_of_the_open_block_before_its_stop() -> None:
    runner = Extensions([loaded(Appends({}), "appends"), loaded(Upper({}), "upper")])
    out = await through(runner, STREAM)
    texts = [event.text for event in valid(out) if isinstance(event, TextDelta)]
    assert texts == ["HELLO", " WORLD", "!"]  # the second hook saw the first one's delta too


@pytest.mark.parametrize("breaking", [DropsStops, AppendsAfterStop])
async def test_breaking_the_grammar_is_a_hook_failure(
    breaking: type[Extension], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    out = await through(Extensions([loaded(breaking({}), "breaks")]), STREAM)
    assert valid(out)[-1] == ErrorEvent(
        ErrorKind.INTERNAL,
        "the extension 'breaks' failed, so kirod did not complete this request",
        code="extension_failed",
    )
    assert not any(isinstance(event, MessageStop) for event in out)
    [logged] = failures(caplog)
    assert (logged["error"], logged["hook"]) == ("broken_rule", "on_stream_event")


async def test_a_grammar_breach_that_skips_lets_the_original_event_through() -> None:
    out = await through(Extensions([loaded(DropsStopsAndSkips({}), "breaks")]), STREAM)
    assert valid(out) == STREAM


async def test_on_response_sees_the_assembled_message_and_on_error_only_observes() -> None:
    observer = Observes()
    runner = Extensions([loaded(observer, "observes"), loaded(Appends({}), "appends")])
    await through(runner, STREAM)
    [completion] = observer.completions
    assert completion.content == (TextBlock("Hello world!"),)  # what the client was sent
    failed = [STREAM[0], ErrorEvent(ErrorKind.UPSTREAM, "Kiro failed", code="upstream_error")]
    assert await through(runner, failed) == failed  # its failing on_error changed nothing
    assert [error.code for error in observer.errors] == ["upstream_error"]


async def test_a_failing_on_response_ends_the_stream_with_the_fixed_error() -> None:
    out = await through(Extensions([loaded(RejectsResponses({}), "rejects")]), STREAM)
    assert valid(out)[:-1] == STREAM[:-1]
    assert isinstance(out[-1], ErrorEvent)
    assert out[-1].code == "extension_failed"


class Configured(Extension):
    schema = {
        "label": OptionSpec(str, "x"),
        "ratio": OptionSpec(float, 0.5),
        "token": OptionSpec(str, "", secret=True),
        "loud": OptionSpec(bool, False),
    }


def points(**targets: str) -> dict[str, EntryPoint]:
    return {
        name: EntryPoint(name, f"{__name__}:{target}", GROUP) for name, target in targets.items()
    }


def test_loading_validates_options_by_the_declared_schema() -> None:
    runner = load_extensions(
        {"conf": {"label": "y", "ratio": 2, "token": "s3cret", "timeout_s": 0.25}},
        points(conf="Configured"),
    )
    [item] = runner.loaded
    assert item.timeout_s == 0.25
    assert item.extension.options == {"label": "y", "ratio": 2.0, "token": "s3cret", "loud": False}
    [info] = runner.report()
    assert info.options == {"label": "y", "ratio": 2.0, "token": "<redacted>", "loud": False}
    assert (info.version, info.priority, info.on_failure, info.hooks) == (
        "unknown",
        100,
        "fail",
        (),
    )


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"colour": "red"}, "unknown option 'extensions.conf.colour'"),
        ({"loud": "yes"}, "invalid value for 'extensions.conf.loud': expected bool"),
        ({"label": 3}, "invalid value for 'extensions.conf.label': expected str"),
        ({"timeout_s": 0}, "invalid value for 'extensions.conf.timeout_s'"),
    ],
)
def test_unknown_or_mistyped_options_are_config_errors(table: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_extensions({"conf": table}, points(conf="Configured"))


def test_an_extension_that_is_not_installed_or_not_an_extension_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"'extensions\.nope': no extension of that name"):
        load_extensions({"nope": {}}, points(conf="Configured"))
    with pytest.raises(ConfigError, match="is not an Extension subclass"):
        load_extensions({"odd": {}}, points(odd="points"))


def test_extension_tables_come_from_the_config_file_and_are_redacted(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[extensions.redactor]\nreplacement = "##"\n\n[extensions.watermark]\n')
    settings = load_settings(env={"HOME": str(tmp_path)}, config_path=config)
    assert settings.extensions == {"redactor": {"replacement": "##"}, "watermark": {}}
    shown = settings.redacted()["extensions"]
    assert shown == {"redactor": {"replacement": "<redacted>"}, "watermark": {}}
    env = {"HOME": str(tmp_path), "KIROD_EXTENSIONS": '{"redactor": {"keys": false}}'}
    assert load_settings(env=env, config_path=config).extensions == {"redactor": {"keys": False}}
    config.write_text("[extensions]\nredactor = 1\n")
    with pytest.raises(ConfigError, match=r"'extensions\.redactor' in .* must be a table"):
        load_settings(env={"HOME": str(tmp_path)}, config_path=config)


def only_sonnet(tenant: str, model: ModelInfo) -> None:
    if model.public_id != MODEL:
        raise ApiError(ErrorKind.PERMISSION, "not this model", code="model_not_allowed")


async def test_the_model_scope_is_checked_again_after_on_request(tmp_path: Path) -> None:
    runner = Extensions([loaded(Reroutes({}), "reroutes")])
    async with pool_env(tmp_path, extensions=runner, authorize=only_sonnet) as env:
        await env.add_account()
        with pytest.raises(ApiError) as raised:
            await env.complete(request())
        assert raised.value.code == "model_not_allowed"
        assert env.fake.requests("chat") == []
        [row] = await env.oplog.entries()
        assert (row.status, row.model, row.extensions) == (403, "claude-opus-4-6", ("reroutes",))
        assert row.attempts == ()  # refused before any account was leased


async def test_the_operation_log_names_the_extensions_that_changed_a_request(
    tmp_path: Path,
) -> None:
    runner = Extensions([loaded(Tag("t", 1), "tag"), loaded(Same({}), "same")])
    async with pool_env(tmp_path, extensions=runner, authorize=only_sonnet) as env:
        await env.add_account()
        events = await env.complete(request())
        assert isinstance(events[-1], MessageStop)
        [row] = await env.oplog.entries()
        assert (row.status, row.extensions) == (200, ("tag",))
        assert row.key_id == TENANT


def redactor(**options: Any) -> Redactor:
    [item] = load_extensions(
        {"redactor": options},
        {"redactor": EntryPoint("redactor", f"{Redactor.__module__}:Redactor", GROUP)},
    ).loaded
    assert isinstance(item.extension, Redactor)
    return item.extension


async def test_the_redactor_masks_addresses_and_keys_in_every_text() -> None:
    asked = dataclasses.replace(
        request("write to bob@mail.example.org, key sk-ant-api03-abcdefghijklmnop"),
        system=("admin: AKIAIOSFODNN7EXAMPLE",),
    )
    changed = redactor().on_request(asked)
    assert changed.system == ("admin: [redacted]",)
    assert changed.messages[0].content == (TextBlock("write to [redacted], key [redacted]"),)
    assert changed.request_id == asked.request_id
    plain = request("nothing secret here: sk-short, me@localhost")
    assert redactor().on_request(plain) is plain
    only_keys = redactor(emails=False, replacement="#").on_request(asked)
    assert only_keys.messages[0].content == (TextBlock("write to bob@mail.example.org, key #"),)


async def test_the_watermark_ends_each_text_block_and_keeps_the_grammar() -> None:
    watermark = Watermark({"text": " [m]"})
    stream = [
        MessageStart("msg_1", MODEL, 3),
        BlockStart(0, BlockKind.TEXT),
        TextDelta(0, "Let me look."),
        BlockStop(0),
        BlockStart(1, BlockKind.TOOL_USE, "toolu_1", "ls"),
        BlockStop(1),
        MessageStop(StopReason.TOOL_USE),
    ]
    runner = Extensions([loaded(watermark, "watermark")])

    async def one() -> list[CanonicalEvent]:
        return await through(runner, stream)

    # One instance serves concurrent streams: each keeps its own open block.
    first, second = await asyncio.gather(one(), one())
    for out in (first, second):
        texts = [(event.index, event.text) for event in valid(out) if isinstance(event, TextDelta)]
        assert texts == [(0, "Let me look."), (0, " [m]")]
