"""`python -m kirod.testing.fake_kiro`: serve the fake on loopback until interrupted.

Prints one JSON line, `{"url": …, "account": <token set>}`, so a script or a human can point
kirod at it; drive it further through `/__fake__/` (see `admin.py`, `RemoteFake`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal

from kirod.testing.fake_kiro.runner import running_fake
from kirod.testing.fake_kiro.script import Latency
from kirod.testing.fake_kiro.state import FakeKiro
from kirod.testing.fake_kiro.usage import PLANS


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m kirod.testing.fake_kiro", description=__doc__)
    parser.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (0: any)")
    parser.add_argument("--subscription", choices=sorted(PLANS), default="KIRO PRO")
    parser.add_argument("--latency-first", type=float, default=0.0, metavar="S")
    parser.add_argument("--latency-between", type=float, default=0.0, metavar="S")
    parser.add_argument("--rotate-refresh-tokens", action="store_true")
    args = parser.parse_args(argv)
    fake = FakeKiro(
        latency=Latency(args.latency_first, args.latency_between),
        rotate_refresh_tokens=args.rotate_refresh_tokens,
    )
    asyncio.run(_serve(fake, port=args.port, subscription=args.subscription))


async def _serve(fake: FakeKiro, *, port: int, subscription: str) -> None:
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stopping.set)
    async with running_fake(fake, port=port) as (_, url):
        account = fake.issue_social_account(subscription=subscription)
        print(json.dumps({"url": url, "account": account.to_json()}), flush=True)
        await stopping.wait()


if __name__ == "__main__":
    main()
