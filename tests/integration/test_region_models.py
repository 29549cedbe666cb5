"""Claude models gated by the region a request leaves from (docs/KIRO-PROTOCOL.md §2.7), through
the real daemon and the official SDKs: Kiro refusing a model the account's catalog listed, or a
catalog that lists no Claude model, is told as the region's or a policy's doing with the way out
(a proxy per account), the non-Claude models keep working, and once the account's traffic
leaves from elsewhere (here: the fake's switch off, and the account's proxy set) the model is
served again without a restart.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import anthropic
import openai
import pytest
from click.testing import CliRunner

from kirod.cli.main import cli
from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Reply, ThreadedFake
from tests.support.kiro_env import import_account, start_daemon

CLAUDE = "claude-sonnet-4-6"
GPT = "gpt-5.6-sol"
HINT = "Kiro may limit models by the region the account's requests leave from"
PROXY = "kiroctl accounts set-proxy ACCOUNT URL"


class Daemon:
    def __init__(self, fake: ThreadedFake, accounts: int) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="kd-"))
        self.proc: DaemonProcess = start_daemon(
            self.root, fake, {"KIROD_ACCOUNT_SELECTION_STRATEGY": "sticky"}
        )
        self.fake: FakeKiro = fake.fake
        self.ids: dict[str, str] = {}  # kirod's account id → the fake's
        for _ in range(accounts):
            tokens = fake.fake.issue_social_account()
            self.ids[import_account(self.proc, tokens)["id"]] = tokens.account_id

    def kiroctl(self, *args: str) -> str:
        result = CliRunner().invoke(cli, ["--socket", str(self.proc.socket_path), *args])
        assert result.exit_code == 0, result.output
        return result.stdout

    def claude(self) -> anthropic.Anthropic:
        return anthropic.Anthropic(
            base_url=self.proc.base_url, api_key=self.proc.api_key, max_retries=0
        )

    def ask(self, model: str = CLAUDE) -> str:
        with self.claude() as client:
            message = client.messages.create(
                model=model, max_tokens=50, messages=[{"role": "user", "content": "hi"}]
            )
        return message.content[0].text  # type: ignore[union-attr]

    def refused(self, model: str = CLAUDE) -> anthropic.APIStatusError:
        with self.claude() as client, pytest.raises(anthropic.APIStatusError) as caught:
            client.messages.create(
                model=model, max_tokens=50, messages=[{"role": "user", "content": "hi"}]
            )
        return caught.value

    def close(self) -> None:
        for fake_id in self.ids.values():
            self.fake.gate_egress(fake_id, False)
        assert self.proc.stop() == 0
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def one(fake: ThreadedFake) -> Iterator[Daemon]:
    daemon = Daemon(fake, 1)
    try:
        yield daemon
    finally:
        daemon.close()


@pytest.fixture
def two(fake: ThreadedFake) -> Iterator[Daemon]:
    daemon = Daemon(fake, 2)
    try:
        yield daemon
    finally:
        daemon.close()


def test_a_gated_account_is_told_why_and_serves_claude_again_through_a_proxy(
    one: Daemon,
) -> None:
    [(account, fake_id)] = one.ids.items()
    assert one.ask() == "You said: hi"  # the catalog read lists Claude
    one.fake.gate_egress(fake_id)  # the network moved where Kiro serves no Claude

    refused = one.refused()  # a model the catalog listed: INVALID_MODEL_ID
    assert isinstance(refused, anthropic.BadRequestError)
    assert refused.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert HINT in refused.message
    assert PROXY in refused.message
    assert "plan" not in refused.message.replace("not for want of a plan", "")
    assert refused.response.headers["x-should-retry"] == "false"

    missing = one.refused()  # the catalog read again: it lists no Claude model
    assert isinstance(missing, anthropic.NotFoundError)
    assert HINT in missing.message
    assert PROXY in missing.message
    assert GPT in missing.message  # what works meanwhile
    chats = len(one.fake.requests("chat"))
    assert isinstance(one.refused("claude-haiku-4-5"), anthropic.NotFoundError)
    assert len(one.fake.requests("chat")) == chats  # known gated: no chat spent on it
    assert one.ask(GPT) == "You said: hi"

    one.fake.gate_egress(fake_id, False)  # as through a proxy elsewhere
    one.kiroctl("accounts", "set-proxy", account, "direct")
    assert one.ask() == "You said: hi"
    assert one.ask("claude-haiku-4-5") == "You said: hi"
    [row] = one.proc.client.accounts()
    assert row.status == "active"  # a region's gate is not the account's failure


def test_the_openai_protocol_hears_the_same(one: Daemon) -> None:
    [(_, fake_id)] = one.ids.items()
    one.fake.gate_egress(fake_id)
    with (
        openai.OpenAI(
            base_url=f"{one.proc.base_url}/v1", api_key=one.proc.api_key, max_retries=0
        ) as client,
        pytest.raises(openai.NotFoundError) as caught,
    ):
        client.responses.create(model=CLAUDE, input="hi")  # first read: no Claude listed
    assert caught.value.code == "model_not_found"
    assert HINT in caught.value.message
    assert PROXY in caught.value.message


def test_a_gated_account_leaves_claude_to_the_other(two: Daemon) -> None:
    assert two.ask() == "You said: hi"
    [serving] = [
        ours for ours, fake in two.ids.items() if fake == two.fake.requests("chat")[-1].account_id
    ]
    [other] = [ours for ours in two.ids if ours != serving]
    two.fake.gate_egress(two.ids[serving])
    two.fake.clear_requests()
    two.fake.enqueue(Reply(text="from the other"), account_id=two.ids[other])
    assert two.ask() == "from the other"  # refused on the gated one, served by the other
    assert two.ask() == "You said: hi"
    served = [chat.account_id for chat in two.fake.requests("chat")]
    assert served == [two.ids[serving], two.ids[other], two.ids[other]]
