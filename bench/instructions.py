"""Instructions per stage of a 90 KB request, counted by valgrind: the A/B that noise cannot blur.

    python -m bench.instructions [--stage NAME ...] [--count 20] [--check]

This machine's timings of the same code spread by 15-40 % from run to run (a shared VM), which
hides a 5 % change in any timed figure. Instructions executed hardly spread: callgrind counts
them, the same to within about 2 % across runs with a fixed hash seed. Each stage (the body's parse,
the protocol's decode, the token estimate, the payload builder, for the bench's 90 KB Messages
and Responses bodies) runs in a child process twice under callgrind, once with its inputs made
and once more also running the stage `--count` times: the difference over the count is the
stage's instructions per request. Run it on two trees (`PYTHONPATH=TREE`) to compare them.

`--check` runs each stage once, in process, without valgrind (the smoke test's mode). valgrind is
a Debian package (`make instructions` installs it); instructions are not time (a cache miss
costs no instruction), so this complements the timed plans rather than replacing them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from bench import payloads
from kirod.canonical.catalog import ModelInfo
from kirod.canonical.request import CanonicalRequest
from kirod.canonical.token_count import estimate_request_tokens
from kirod.http.body import parse_json
from kirod.protocols.anthropic import decode_messages
from kirod.protocols.anthropic.signatures import ThinkingSigner
from kirod.protocols.responses.decode import decode_responses
from kirod.protocols.responses.reasoning import ReasoningBox
from kirod.upstream.payload import build_payload

PROTOCOLS = ("messages", "responses")
STEPS = ("parse", "decode", "tokens", "payload")
STAGES = tuple(f"{protocol}-{step}" for protocol in PROTOCOLS for step in STEPS)
_COLLECTED = re.compile(r"Collected : (\d+)")
_KEY = bytes(range(32))


def _body(protocol: str) -> bytes:
    make = payloads.messages_large if protocol == "messages" else payloads.responses_large
    return json.dumps(make(stream=True)).replace("@@SEQ@@", "1").encode()


def _decoder(protocol: str) -> Callable[[Any], CanonicalRequest]:
    if protocol == "messages":
        signer = ThinkingSigner(_KEY)
        return lambda body: decode_messages(body, {}, request_id="r", signer=signer)
    box = ReasoningBox(_KEY)
    return lambda body: decode_responses(body, {}, request_id="r", reasoning_box=box).request


def _prepared(stage: str, count: int) -> Callable[[], None]:
    """The stage's work over `count` requests, its inputs made (and every cache warmed) first."""
    protocol, step = stage.split("-")
    decode = _decoder(protocol)
    model = ModelInfo(
        "claude-sonnet-4-6" if protocol == "messages" else "gpt-5", "claude-sonnet-4.6", "Sonnet"
    )
    # Distinct bytes, as each request's are: nothing is hashed once for all of them.
    raws = [_body(protocol) + b" " * index for index in range(count)]
    warm = decode(parse_json(raws[0]))
    build_payload(warm, model, conversation_id="c", profile_arn=None)
    estimate_request_tokens(warm)

    def payload(request: CanonicalRequest) -> object:
        return build_payload(request, model, conversation_id="c", profile_arn=None)

    # Each step's input is the step before's output, made here, outside the measured run.
    steps: list[Callable[[Any], object]] = [parse_json, decode, estimate_request_tokens, payload]
    at = STEPS.index(step)
    inputs: list[Any] = raws
    for before in (parse_json, decode)[: min(at, 2)]:
        inputs = [before(item) for item in inputs]
    work = steps[at]

    def run() -> None:
        for item in inputs:
            work(item)

    return run


def _collected(stage: str, count: int, *, run: bool) -> int:
    command = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        "-m",
        "bench.instructions",
        "--child",
        stage,
        "--count",
        str(count),
    ]
    if run:
        command.append("--run")
    env = {**os.environ, "PYTHONHASHSEED": "0"}  # dict and set layouts alike in every child
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    found = _COLLECTED.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"{stage}: callgrind failed\n{done.stderr[-2000:]}")
    return int(found[1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.instructions", description=__doc__)
    parser.add_argument("--stage", action="append", choices=STAGES, help="default: all")
    parser.add_argument("--count", type=int, default=20, help="requests per measured run")
    parser.add_argument("--check", action="store_true", help="run each stage once, no valgrind")
    parser.add_argument("--child", choices=STAGES, help=argparse.SUPPRESS)
    parser.add_argument("--run", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        work = _prepared(args.child, args.count)
        if args.run:
            work()
        return
    stages = args.stage or list(STAGES)
    if args.check:
        for stage in stages:
            _prepared(stage, 1)()
            print(f"{stage}: ran")
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed: `make instructions` installs it")
    print(f"| stage | instructions per request (callgrind, {args.count} requests) |")
    print("|---|---:|")
    for stage in stages:
        setup = _collected(stage, args.count, run=False)
        total = _collected(stage, args.count, run=True)
        print(f"| {stage} | {(total - setup) / args.count / 1e6:.3f} M |", flush=True)


if __name__ == "__main__":
    main()
