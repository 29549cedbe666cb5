"""The extension runner: loading the enabled extensions, validating their options, and running
their hooks around a request with the time bounds, failure policy and event-grammar rules that
`kirod.extension` (the public contract) describes.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any, cast

from kirod import log
from kirod.canonical.assemble import Assembler, CanonicalCompletion
from kirod.canonical.events import (
    BlockKind,
    BlockStart,
    BlockStop,
    CanonicalEvent,
    ErrorEvent,
    MessageStart,
    MessageStop,
    RedactedThinking,
    SearchResults,
    ServerToolUse,
    SignatureDelta,
    TextDelta,
    ThinkingDelta,
    ToolInputDelta,
    Usage,
)
from kirod.canonical.request import CanonicalRequest
from kirod.errors import ApiError, ConfigError, ErrorKind
from kirod.extension import (
    Extension,
    KeyBudget,
    OnFailure,
    OptionSpec,
    budget_told,
    budget_untold,
)
from kirod.report_types import ExtensionInfo

GROUP = "kirod.extensions"
DEFAULT_TIMEOUT_S = 1.0

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Loaded:
    """An enabled extension: its name, distribution version, instance and time bound."""

    name: str
    version: str
    extension: Extension
    timeout_s: float = DEFAULT_TIMEOUT_S

    @property
    def priority(self) -> int:
        return self.extension.priority

    @property
    def on_failure(self) -> OnFailure:
        return self.extension.on_failure

    def shown_options(self) -> dict[str, Any]:
        """Its options for `kiroctl extensions`, secret ones as a marker."""
        schema = type(self.extension).schema
        return {
            key: "<redacted>" if schema[key].secret else value
            for key, value in self.extension.options.items()
        }

    def overrides(self, hook: str) -> bool:
        return getattr(type(self.extension), hook) is not getattr(Extension, hook)


def extension_failed(name: str) -> ApiError:
    """The fixed error of a failed hook: it names the extension, never what went wrong in it."""
    return ApiError(
        ErrorKind.INTERNAL,
        f"the extension {name!r} failed, so kirod did not complete this request",
        code="extension_failed",
    )


def installed() -> dict[str, EntryPoint]:
    """The extensions installed in this environment, by entry-point name."""
    return {point.name: point for point in entry_points(group=GROUP)}


def load_extensions(
    tables: Mapping[str, Mapping[str, Any]], available: Mapping[str, EntryPoint] | None = None
) -> Extensions:
    """Load each extension `tables` enables (`[extensions.NAME]`), its options validated."""
    available = installed() if available is None else available
    loaded: list[Loaded] = []
    for name, table in tables.items():
        point = available.get(name)
        if point is None:
            known = ", ".join(sorted(available)) or "none"
            raise ConfigError(
                f"'extensions.{name}': no extension of that name is installed (entry-point "
                f"group {GROUP}; installed: {known})"
            )
        try:
            cls = point.load()
        except Exception as exc:  # a broken package: its name and the exception type only
            raise ConfigError(
                f"'extensions.{name}': {point.value} cannot be imported ({type(exc).__name__})"
            ) from None
        if not (isinstance(cls, type) and issubclass(cls, Extension)):
            raise ConfigError(f"'extensions.{name}': {point.value} is not an Extension subclass")
        if cls.on_failure not in ("fail", "skip"):
            raise ConfigError(f"'extensions.{name}': on_failure must be 'fail' or 'skip'")
        timeout_s, options = _options(name, cls.schema, table)
        version = point.dist.version if point.dist is not None else "unknown"
        loaded.append(Loaded(name, version, cls(options), timeout_s))
    return Extensions(loaded)


def _options(
    name: str, schema: Mapping[str, OptionSpec], table: Mapping[str, Any]
) -> tuple[float, dict[str, Any]]:
    """The table's `timeout_s` and its options by the schema, defaults filled in; errors name
    `extensions.NAME.option` and never show a value (it may be a secret)."""
    options = {key: spec.default for key, spec in schema.items()}
    timeout_s = DEFAULT_TIMEOUT_S
    for key, value in table.items():
        where = f"'extensions.{name}.{key}'"
        if key == "timeout_s":
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ConfigError(f"invalid value for {where}: expected a number > 0")
            timeout_s = float(value)
            continue
        spec = schema.get(key)
        if spec is None:
            takes = ", ".join(sorted([*schema, "timeout_s"]))
            raise ConfigError(f"unknown option {where} (the extension takes {takes})")
        if spec.type is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if type(value) is not spec.type:
            raise ConfigError(f"invalid value for {where}: expected {spec.type.__name__}")
        options[key] = value
    return timeout_s, options


_HOOKS = ("on_request", "on_stream_event", "on_response", "on_error")


class _Failed(Exception):
    """A hook failed; it has been logged. Internal to the runner."""


class _Breach(Exception):
    """A hook broke a rule of the module docstring; `rule` says which, in our own words."""

    def __init__(self, rule: str) -> None:
        super().__init__(rule)
        self.rule = rule


# Events whose removal, change or duplication would break the grammar or its block indexes.
_STRUCTURAL = (
    MessageStart,
    BlockStart,
    BlockStop,
    MessageStop,
    ErrorEvent,
    RedactedThinking,
    ServerToolUse,
    SearchResults,
)
_DELTA_KIND: dict[type, BlockKind] = {
    TextDelta: BlockKind.TEXT,
    ThinkingDelta: BlockKind.THINKING,
    SignatureDelta: BlockKind.THINKING,
    ToolInputDelta: BlockKind.TOOL_USE,
}


def _advance(event: CanonicalEvent, open_block: BlockStart | None) -> BlockStart | None:
    """The block open after `event`."""
    if isinstance(event, BlockStart):
        return event
    if isinstance(event, BlockStop):
        return None
    return open_block


def _fits(
    produced: Sequence[object], given: CanonicalEvent, open_block: BlockStart | None
) -> BlockStart | None:
    """Check what a hook made of `given` (with `open_block` open before it); the block open
    after it. Raises `_Breach`."""
    structural = isinstance(given, _STRUCTURAL)
    kept = False
    for event in produced:
        if isinstance(event, _STRUCTURAL):
            if not structural or kept or (event is not given and event != given):
                raise _Breach("structural events pass unchanged, once")
            kept = True
            open_block = _advance(event, open_block)
        elif kept and isinstance(given, MessageStop | ErrorEvent):
            raise _Breach("nothing follows the terminal event")
        elif isinstance(event, Usage):
            continue
        else:
            kind = _DELTA_KIND.get(type(event))
            if kind is None or open_block is None or open_block.kind is not kind:
                raise _Breach("a delta belongs to the open block of its kind")
            if getattr(event, "index", None) != open_block.index:
                raise _Breach("a delta belongs to the open block of its kind")
    if structural and not kept:
        raise _Breach("structural events cannot be dropped")
    return open_block


def _as_list(produced: object) -> list[object]:
    if produced is None:
        return []
    if isinstance(produced, list | tuple):
        return list(produced)
    return [produced]


class Extensions:
    """The enabled extensions in priority order, and the runner of their hooks."""

    def __init__(self, loaded: Sequence[Loaded] = ()) -> None:
        self.loaded = tuple(sorted(loaded, key=lambda item: (item.priority, item.name)))
        self._request = [item for item in self.loaded if item.overrides("on_request")]
        self._event = [item for item in self.loaded if item.overrides("on_stream_event")]
        self._response = [item for item in self.loaded if item.overrides("on_response")]
        self._error = [item for item in self.loaded if item.overrides("on_error")]

    def __bool__(self) -> bool:
        return bool(self.loaded)

    def report(self) -> tuple[ExtensionInfo, ...]:
        """What `kiroctl extensions` shows, in the order the hooks run."""
        return tuple(
            ExtensionInfo(
                name=item.name,
                version=item.version,
                priority=item.priority,
                on_failure=item.on_failure,
                timeout_s=item.timeout_s,
                hooks=tuple(hook for hook in _HOOKS if item.overrides(hook)),
                options=item.shown_options(),
            )
            for item in self.loaded
        )

    async def _run(self, item: Loaded, hook: str, arg: Any) -> Any:
        """One hook of `item` on `arg`; `_Failed` (logged) when it raises or outlives
        `timeout_s`. Only a coroutine gets a timer: no timer could stop code that never yields
        to the loop, and arming one per event would cost more than a trivial hook."""
        try:
            result = getattr(item.extension, hook)(arg)
            if inspect.isawaitable(result):
                async with asyncio.timeout(item.timeout_s):
                    result = await result
        except Exception as exc:  # the extension's own: its type is logged, never its text
            self._log(item, hook, type(exc).__name__)
            raise _Failed from None
        return result

    def _log(self, item: Loaded, hook: str, error: str, rule: str | None = None) -> None:
        log.event(
            logger,
            "extension_failed",
            level=logging.WARNING,
            extension=item.name,
            hook=hook,
            error=error,
            rule=rule,
            skipped=item.on_failure == "skip",
        )

    async def request(
        self, request: CanonicalRequest, budget: KeyBudget | None = None
    ) -> tuple[CanonicalRequest, tuple[str, ...]]:
        """`request` through each `on_request`, and the names of the extensions that changed it;
        `key_budget()` answers `budget` meanwhile.

        Raises the `extension_failed` error when one fails and does not skip."""
        told = budget_told(budget)
        try:
            return await self._requested(request)
        finally:
            budget_untold(told)

    async def _requested(
        self, request: CanonicalRequest
    ) -> tuple[CanonicalRequest, tuple[str, ...]]:
        changed: list[str] = []
        for item in self._request:
            try:
                result = await self._run(item, "on_request", request)
                if result is request:
                    continue
                if not isinstance(result, CanonicalRequest):
                    self._log(item, "on_request", "TypeError")
                    raise _Failed
                if (result.request_id, result.protocol, result.stream) != (
                    request.request_id,
                    request.protocol,
                    request.stream,
                ):
                    rule = "the request's id, protocol and stream stay"
                    self._log(item, "on_request", "broken_rule", rule)
                    raise _Failed
            except _Failed:
                if item.on_failure == "skip":
                    continue
                raise extension_failed(item.name) from None
            if result != request:
                changed.append(item.name)
                request = result
        return request, tuple(changed)

    async def error(self, error: ApiError) -> None:
        """Tell each `on_error` about `error`; their failures are logged and go no further."""
        for item in self._error:
            try:
                await self._run(item, "on_error", error)
            except _Failed:
                continue

    def events(
        self, batches: AsyncIterator[list[CanonicalEvent]]
    ) -> AsyncIterator[list[CanonicalEvent]]:
        """The stream as the hooks make it; `batches` itself when no hook looks at it."""
        if not (self._event or self._response or self._error):
            return batches
        return self._events(batches)

    async def _events(
        self, batches: AsyncIterator[list[CanonicalEvent]]
    ) -> AsyncIterator[list[CanonicalEvent]]:
        assembler = Assembler() if self._response else None
        open_block: BlockStart | None = None
        async for batch in batches:
            out: list[CanonicalEvent] = []
            for event in batch:
                try:
                    produced = await self._through(event, open_block) if self._event else [event]
                except ApiError as failed:
                    out.append(ErrorEvent.from_error(failed))
                    await self.error(failed)
                    yield out
                    return
                open_block = _advance(event, open_block)
                for made in produced:
                    if isinstance(made, ErrorEvent):
                        await self.error(made.to_error())
                    elif assembler is not None:
                        assembler = self._fold(assembler, made)
                        if isinstance(made, MessageStop) and assembler is not None:
                            failed_by = await self._completed(assembler.result())
                            if failed_by is not None:  # the stream ends failed instead
                                out.append(ErrorEvent.from_error(failed_by))
                                await self.error(failed_by)
                                yield out
                                return
                    out.append(made)
            yield out

    async def _through(
        self, event: CanonicalEvent, open_block: BlockStart | None
    ) -> list[CanonicalEvent]:
        """`event` through each `on_stream_event`, checked against the grammar's rules."""
        events: list[CanonicalEvent] = [event]
        for item in self._event:
            produced: list[CanonicalEvent] = []
            cursor = open_block
            for given in events:
                try:
                    result = await self._run(item, "on_stream_event", given)
                    if result is given:  # passed on as it came, most events: nothing to check
                        produced.append(given)
                        cursor = _advance(given, cursor)
                        continue
                    made = _as_list(result)
                    try:
                        cursor = _fits(made, given, cursor)
                    except _Breach as breach:
                        self._log(item, "on_stream_event", "broken_rule", breach.rule)
                        raise _Failed from None
                except _Failed:
                    if item.on_failure == "fail":
                        raise extension_failed(item.name) from None
                    made, cursor = [given], _advance(given, cursor)
                produced.extend(cast(list[CanonicalEvent], made))  # _fits checked them
            events = produced
        return events

    @staticmethod
    def _fold(assembler: Assembler, event: CanonicalEvent) -> Assembler | None:
        """Feed the completion `on_response` will see; None once it cannot be assembled."""
        try:
            assembler.feed(event)
        except ApiError:  # tool input that is no JSON object: the encoders say so, not us
            return None
        return assembler

    async def _completed(self, completion: CanonicalCompletion) -> ApiError | None:
        """Call each `on_response` with the whole message; the error that ends it, if any."""
        for item in self._response:
            try:
                await self._run(item, "on_response", completion)
            except _Failed:
                if item.on_failure == "fail":
                    return extension_failed(item.name)
        return None


NONE = Extensions()
"""No extension enabled: every hook is a no-op and the stream passes untouched."""
