"""`max_tokens` above the model's output limit: served on all three protocols, and logged.

Kiro takes no output limit, so the model's own applies whatever the client asks; kirod serves the
request and names the clamp in the request's log line rather than refusing it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anthropic
import openai
import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import ThreadedFake
from tests.support.kiro_env import import_account, start_daemon

MODEL = "claude-sonnet-4-6"
HUGE = 10_000_000


@pytest.fixture(scope="module")
def daemon(module_tmp: Path) -> Iterator[DaemonProcess]:
    with ThreadedFake() as fake:
        proc = start_daemon(module_tmp, fake, {"KIROD_ENABLE_CHAT_COMPLETIONS": "true"})
        import_account(proc, fake.fake.issue_social_account())
        try:
            yield proc
        finally:
            assert proc.stop() == 0


def test_a_limit_above_the_models_is_served_and_logged_on_every_protocol(
    daemon: DaemonProcess,
) -> None:
    with (
        anthropic.Anthropic(base_url=daemon.base_url, api_key=daemon.api_key, max_retries=0) as a,
        openai.OpenAI(base_url=f"{daemon.base_url}/v1", api_key=daemon.api_key, max_retries=0) as o,
    ):
        with a.messages.stream(  # the SDK refuses a limit this large unless it streams
            model=MODEL, max_tokens=HUGE, messages=[{"role": "user", "content": "hi"}]
        ) as stream:
            message = stream.get_final_message()
        response = o.responses.create(model=MODEL, max_output_tokens=HUGE, input="hi")
        chat = o.chat.completions.create(
            model=MODEL, max_completion_tokens=HUGE, messages=[{"role": "user", "content": "hi"}]
        )
    assert message.stop_reason == "end_turn"
    assert response.status == "completed"
    assert chat.choices[0].finish_reason == "stop"
    clamped = [line for line in daemon.log().splitlines() if "max_tokens_clamped" in line]
    assert len(clamped) == 3
    assert all(f"{HUGE}>" in line for line in clamped)
