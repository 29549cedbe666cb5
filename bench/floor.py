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
import contextlib
import json
import select
import signal
import subprocess
import sys
from pathlib import Path
from types import TracebackType

import aiohttp
from aiohttp import web

from bench.env import START_TIMEOUT_S, STOP_TIMEOUT_S

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


class FloorProcess:
    """`python -m bench.floor` relaying to `upstream`, on a free loopback port."""

    def __init__(self, upstream: str, *, keep_alive: bool, log_path: Path) -> None:
        self._log = log_path.open("ab")
        command = [sys.executable, "-m", "bench.floor", "--upstream", upstream]
        if keep_alive:
            command.append("--keep-alive")
        self.proc = subprocess.Popen(
            command, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._log
        )
        try:
            self.url: str = json.loads(self._first_line())["url"]
        except BaseException:
            self.stop()
            raise

    def _first_line(self) -> bytes:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], START_TIMEOUT_S)
        if not ready:
            raise RuntimeError(
                f"the floor relay did not announce itself within {START_TIMEOUT_S} s"
            )
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the floor relay exited with {self.proc.wait(STOP_TIMEOUT_S)}")
        return line

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after STOP_TIMEOUT_S; the exit status (None if it never ended)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(STOP_TIMEOUT_S)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log.close()
        return self.proc.returncode

    def __enter__(self) -> FloorProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.floor", description=__doc__)
    parser.add_argument("--upstream", required=True, metavar="URL", help="the fake Kiro's URL")
    parser.add_argument("--keep-alive", action="store_true", help="reuse upstream connections")
    args = parser.parse_args(argv)
    asyncio.run(serve(args.upstream, keep_alive=args.keep_alive))


if __name__ == "__main__":
    main()
