"""What is measured: the request kinds, and how many of them each kind of run sends."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from bench import payloads
from bench.loadgen import Framing, Target

Protocol = Literal["messages", "responses"]
Size = Literal["small", "large"]

ANTHROPIC_VERSION = "2023-06-01"
REPLY_FRAMES = 18
"""Text frames in the fake's answer; with its metering and context-usage frames, 20 in all."""
REPLY_CHUNK = 24
REPLY_TEXT = payloads.prose(REPLY_FRAMES * REPLY_CHUNK, seed=5)


@dataclass(frozen=True)
class Scenario:
    protocol: Protocol
    size: Size
    stream: bool

    @property
    def name(self) -> str:
        return f"{self.protocol}-{'stream' if self.stream else 'json'}-{self.size}"

    @property
    def path(self) -> str:
        return "/v1/messages" if self.protocol == "messages" else "/v1/responses"

    def body(self) -> bytes:
        build: Callable[..., dict[str, Any]] = {
            ("messages", "small"): payloads.messages_small,
            ("messages", "large"): payloads.messages_large,
            ("responses", "small"): payloads.responses_small,
            ("responses", "large"): payloads.responses_large,
        }[(self.protocol, self.size)]
        return payloads.body_bytes(build(stream=self.stream))

    def kirod_target(self, base_url: str, api_key: str) -> Target:
        headers = {"Content-Type": "application/json"}
        if self.protocol == "messages":
            headers |= {"x-api-key": api_key, "anthropic-version": ANTHROPIC_VERSION}
        else:
            headers["Authorization"] = f"Bearer {api_key}"
        content, end = _markers(self.protocol, self.stream)
        return Target(
            name=self.name,
            url=base_url + self.path,
            headers=headers,
            body=self.body(),
            framing="sse" if self.stream else "json",
            content_marker=content,
            end_marker=end,
        )


def _markers(protocol: Protocol, stream: bool) -> tuple[bytes, bytes]:
    if protocol == "messages":
        return (b"content_block_delta", b"message_stop") if stream else (b'"text"', b"end_turn")
    if stream:
        return b"response.output_text.delta", b"response.completed"
    return b'"output_text"', b'"total_tokens"'


def baseline_target(scenario: Scenario, fake_url: str, access_token: str, body: bytes) -> Target:
    """The same exchange straight to the fake: the body kirod sent upstream for `scenario`."""
    framing: Framing = "eventstream"
    return Target(
        name=scenario.name,
        url=fake_url + "/generateAssistantResponse",
        headers={
            "Authorization": f"Bearer {access_token}",
            "Content-Type": "application/json",
            "Accept": "application/json",
        },
        body=body,
        framing=framing,
        content_marker=b"assistantResponseEvent",
        end_marker=b"contextUsageEvent",
    )


SCENARIOS: Mapping[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(protocol, size, stream)
        for protocol in ("messages", "responses")
        for stream in (True, False)
        for size in ("small", "large")
    )
}


@dataclass(frozen=True)
class Plan:
    """How much of everything a run does; every loop below is bounded by these numbers."""

    name: str
    scenarios: tuple[str, ...]
    concurrencies: tuple[int, ...]
    counts: Mapping[int, int]  # requests per phase, by concurrency
    phase_time_s: float  # no request starts after this many seconds of a phase
    relay_frames: int  # text frames per answer in the relay phase (no delays)
    relay_concurrency: int
    relay_count: int
    rss_streams: tuple[int, ...]  # concurrent long streams held open for the memory figures
    rss_stream_s: float  # how long each of those streams lasts
    startup_runs: int
    cli_runs: int
    warmup: bool = True


FULL = Plan(
    name="full",
    scenarios=tuple(SCENARIOS),
    concurrencies=(1, 16, 64, 256),
    counts={1: 100, 16: 640, 64: 2000, 256: 3000},
    phase_time_s=30.0,
    relay_frames=400,
    relay_concurrency=16,
    relay_count=160,
    rss_streams=(64, 1000),
    rss_stream_s=3.0,
    startup_runs=5,
    cli_runs=10,
)

QUICK = Plan(
    name="quick",
    scenarios=("messages-stream-small", "messages-stream-large", "responses-stream-large"),
    concurrencies=(1, 64),
    # 2 000 at 64 streams (31 each): with 10 each, ramp-up and ramp-down inflate CPU per request.
    counts={1: 50, 64: 2000},
    phase_time_s=15.0,
    relay_frames=200,
    relay_concurrency=16,
    relay_count=64,
    rss_streams=(64, 1000),
    rss_stream_s=3.0,
    startup_runs=3,
    cli_runs=3,
)

SMOKE = Plan(
    name="smoke",
    scenarios=("messages-stream-small", "responses-json-large"),
    concurrencies=(1, 4),
    counts={1: 3, 4: 8},
    phase_time_s=5.0,
    relay_frames=40,
    relay_concurrency=2,
    relay_count=4,
    rss_streams=(8,),
    rss_stream_s=0.3,
    startup_runs=1,
    cli_runs=1,
    warmup=False,
)

PLANS: Mapping[str, Plan] = {plan.name: plan for plan in (FULL, QUICK, SMOKE)}
