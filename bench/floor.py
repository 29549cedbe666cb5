"""`python -m bench.floor`: the aiohttp floor, a relay with nothing of kirod in it.

It serves `POST /generateAssistantResponse`: reads the body, posts it to the upstream's same path
with the incoming Authorization and Content-Type through one aiohttp client session (a fresh
connection per request unless `--keep-alive`, like kirod's upstream client), and writes the
upstream's raw chunks back as they arrive. No parsing, translation, accounts or logging: what it
adds over the fake is what any aiohttp relay costs on this machine, the floor under kirod's
figures. Prints `{"url": "http://127.0.0.1:PORT"}` once listening; SIGTERM or SIGINT stops it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from pathlib import Path

import aiohttp
from aiohttp import web

from bench.env import AnnouncedProcess

RELAY_PATH = "/generateAssistantResponse"
FORWARDED = ("Authorization", "Content-Type")
ROOT = Path(__file__).resolve().parents[1]
"""The directory holding the `bench` package, which is not installed: the child runs from it."""


def make_app(session: aiohttp.ClientSession, upstream: str) -> web.Application:
    async def relay(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = {name: request.headers[name] for name in FORWARDED if name in request.headers}
        async with session.post(upstream + RELAY_PATH, data=body, headers=headers) as answer:
            content_type = answer.headers.get("Content-Type", "application/octet-stream")
            response = web.StreamResponse(
                status=answer.status, headers={"Content-Type": content_type}
            )
            await response.prepare(request)
            async for chunk in answer.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response

    app = web.Application()
    app.router.add_post(RELAY_PATH, relay)
    return app


async def serve(upstream: str, *, keep_alive: bool) -> None:
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stopping.set)
    connector = aiohttp.TCPConnector(force_close=not keep_alive, limit=0)
    async with aiohttp.ClientSession(connector=connector, trust_env=False) as session:
        runner = web.AppRunner(make_app(session, upstream.rstrip("/")), access_log=None)
        await runner.setup()
        try:
            await web.TCPSite(runner, "127.0.0.1", 0).start()
            port = runner.addresses[0][1]
            print(json.dumps({"url": f"http://127.0.0.1:{port}"}), flush=True)
            await stopping.wait()
        finally:
            await runner.cleanup()


class FloorProcess(AnnouncedProcess):
    """`python -m bench.floor` relaying to `upstream`, on a free loopback port."""

    def __init__(self, upstream: str, *, keep_alive: bool, log_path: Path) -> None:
        command = [sys.executable, "-m", "bench.floor", "--upstream", upstream]
        if keep_alive:
            command.append("--keep-alive")
        super().__init__("floor relay", command, log_path, cwd=ROOT)
        self.url: str = self.announced["url"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.floor", description=__doc__)
    parser.add_argument("--upstream", required=True, metavar="URL", help="the fake Kiro's URL")
    parser.add_argument("--keep-alive", action="store_true", help="reuse upstream connections")
    args = parser.parse_args(argv)
    asyncio.run(serve(args.upstream, keep_alive=args.keep_alive))


if __name__ == "__main__":
    main()
