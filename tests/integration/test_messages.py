"""Anthropic Messages end to end: the official SDK → the real daemon → the fake Kiro service."""

from __future__ import annotations

import base64
import dataclasses
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

from kirod.testing.daemon import DaemonProcess
from kirod.testing.fake_kiro import FakeKiro, Fault, Reply, Script, ThreadedFake, ToolCall
from tests.support.kiro_env import import_account, start_daemon

MODEL = "claude-sonnet-4-6"
TAG_MODEL = "claude-sonnet-4-5"
PNG_1X1 = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000100e221bc330000000049454e44ae426082"
    )
).decode()


@pytest.fixture(scope="module")
def daemon(fake: ThreadedFake, module_tmp: Path) -> Iterator[DaemonProcess]:
    root = module_tmp
    proc = start_daemon(root, fake)
    tokens = fake.fake.issue_social_account()
    import_account(proc, tokens)
    try:
        yield proc
    finally:
        proc.kill()
        log = proc.log()
        for secret in fake.fake.issued_secrets():
            assert secret not in log
        assert proc.api_key not in log


def wait_for_line(daemon: DaemonProcess, *needles: str) -> str:
    """The daemon's first log line holding every needle, waiting up to 5 s for it."""
    deadline = time.monotonic() + 5.0
    while True:
        for line in daemon.log().splitlines():
            if all(needle in line for needle in needles):
                return line
        assert time.monotonic() < deadline, f"no log line with {needles}"
        time.sleep(0.05)


def last_chat(service: FakeKiro) -> dict[str, Any]:
    body = service.requests("chat")[-1].json
    assert isinstance(body, dict)
    return body


def test_plain_text(claude: anthropic.Anthropic, service: FakeKiro) -> None:
    service.enqueue(Reply(text="Hello from Kiro."))
    message = claude.messages.create(
        model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "hi"}]
    )
    assert message.id.startswith("msg_")
    assert message.model == MODEL
    assert [block.type for block in message.content] == ["text"]
    assert message.content[0].text == "Hello from Kiro."  # type: ignore[union-attr]
    assert message.stop_reason == "end_turn"
    assert message.usage.input_tokens > 0
    assert message.usage.output_tokens > 0
    sent = last_chat(service)["conversationState"]["currentMessage"]["userInputMessage"]
    assert sent["content"] == "hi"
    assert sent["modelId"] == "claude-sonnet-4.6"


def test_streaming_text(claude: anthropic.Anthropic, service: FakeKiro) -> None:
    service.enqueue(Script(reply=Reply(text="one two three four five"), chunk_size=3))
    with claude.messages.stream(
        model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "count"}]
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "one two three four five"
    assert final.content[0].text == text  # type: ignore[union-attr]


def test_one_access_log_line_names_the_account_and_model(
    claude: anthropic.Anthropic, service: FakeKiro, daemon: DaemonProcess
) -> None:
    service.enqueue(Reply(text="logged"))
    with claude.messages.create(
        model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "hi"}], stream=True
    ) as stream:
        events = [event.type for event in stream]
        request_id = stream.response.headers["x-request-id"]
    assert events[-1] == "message_stop"
    line = wait_for_line(daemon, f"request_id={request_id}", " request ")
    assert "status=200" in line
    assert re.search(r" account=\S+ upstream_model=claude-sonnet-4.6 attempt=1", line), line


def test_thinking_then_tool_call_then_tool_result(
    claude: anthropic.Anthropic, service: FakeKiro
) -> None:
    tools: list[Any] = [
        {
            "name": "get_weather",
            "description": "Weather for a city",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
        }
    ]
    service.enqueue(
        Reply(
            thinking="The user wants the weather; call the tool.",
            tool_calls=(ToolCall("get_weather", {"city": "Paris"}),),
        )
    )
    question: Any = {"role": "user", "content": "Weather in Paris?"}
    # A model with no request schema (the 4.5 generation) thinks by prompt tags
    # (docs/KIRO-PROTOCOL.md §2.4), whose thinking kirod signs itself.
    with claude.messages.stream(
        model=TAG_MODEL,
        max_tokens=4000,
        thinking={"type": "enabled", "budget_tokens": 2048},
        tools=tools,
        messages=[question],
    ) as stream:
        first = stream.get_final_message()
    kinds = [block.type for block in first.content]
    assert kinds == ["thinking", "tool_use"]
    thinking, tool_use = first.content
    assert thinking.thinking == "The user wants the weather; call the tool."  # type: ignore[union-attr]
    assert thinking.signature.startswith("kirod.")  # type: ignore[union-attr]
    assert tool_use.input == {"city": "Paris"}  # type: ignore[union-attr]
    assert first.stop_reason == "tool_use"
    sent = last_chat(service)["conversationState"]["currentMessage"]["userInputMessage"]
    assert sent["content"].startswith("<thinking_mode>enabled</thinking_mode>")

    service.enqueue(Reply(text="It is sunny in Paris."))
    second = claude.messages.create(
        model=TAG_MODEL,
        max_tokens=4000,
        thinking={"type": "enabled", "budget_tokens": 2048},
        tools=tools,
        messages=[
            question,
            {"role": "assistant", "content": first.content},  # type: ignore[typeddict-item]
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": tool_use.id,  # type: ignore[union-attr]
                        "content": "18°C and sunny",
                    }
                ],
            },
        ],
    )
    assert second.content[0].text == "It is sunny in Paris."  # type: ignore[union-attr]
    state = last_chat(service)["conversationState"]
    assistant = state["history"][-1]["assistantResponseMessage"]
    assert assistant["toolUses"][0]["toolUseId"] == tool_use.id  # type: ignore[union-attr]
    result = state["currentMessage"]["userInputMessage"]["userInputMessageContext"]["toolResults"]
    assert result[0]["toolUseId"] == tool_use.id  # type: ignore[union-attr]
    assert result[0]["content"] == [{"text": "18°C and sunny"}]
    assert "The user wants the weather" not in json.dumps(state)  # thinking is not replayed as text


def test_tampered_thinking_is_dropped_not_forwarded(
    claude: anthropic.Anthropic, service: FakeKiro
) -> None:
    service.enqueue(Reply(text="ok"))
    claude.messages.create(
        model=MODEL,
        max_tokens=100,
        messages=[
            {"role": "user", "content": "a"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "forged", "signature": "kirod.t1.AAAA"},
                    {"type": "text", "text": "b"},
                ],
            },
            {"role": "user", "content": "c"},
        ],
    )
    assert "forged" not in json.dumps(last_chat(service))


def test_image_and_tool_error_result(claude: anthropic.Anthropic, service: FakeKiro) -> None:
    service.enqueue(Reply(text="I see a pixel."))
    claude.messages.create(
        model=MODEL,
        max_tokens=100,
        tools=[{"name": "look", "description": "look", "input_schema": {"type": "object"}}],
        messages=[
            {"role": "user", "content": "look"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "tooluse_1", "name": "look", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "tooluse_1",
                        "is_error": True,
                        "content": "camera offline",
                    },
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": PNG_1X1},
                    },
                ],
            },
        ],
    )
    current = last_chat(service)["conversationState"]["currentMessage"]["userInputMessage"]
    assert current["images"] == [{"format": "png", "source": {"bytes": PNG_1X1}}]
    result = current["userInputMessageContext"]["toolResults"][0]
    assert result["status"] == "error"


def test_many_tools_with_a_long_name(claude: anthropic.Anthropic, service: FakeKiro) -> None:
    long_name = "t" * 100
    tools: list[Any] = [
        {"name": f"tool_{i}", "description": f"tool {i}", "input_schema": {"type": "object"}}
        for i in range(24)
    ]
    tools.append({"name": long_name, "description": "long", "input_schema": {"type": "object"}})
    service.enqueue(Reply(text="placeholder"))
    claude.messages.create(
        model=MODEL, max_tokens=100, tools=tools, messages=[{"role": "user", "content": "x"}]
    )
    context = last_chat(service)["conversationState"]["currentMessage"]["userInputMessage"]
    sent_tools = [
        t["toolSpecification"]["name"] for t in context["userInputMessageContext"]["tools"]
    ]
    assert len(sent_tools) == 25
    short = next(name for name in sent_tools if name.startswith("ttt"))
    assert len(short) <= 64

    service.enqueue(Reply(tool_calls=(ToolCall(short, {"a": 1}),)))
    message = claude.messages.create(
        model=MODEL, max_tokens=100, tools=tools, messages=[{"role": "user", "content": "x"}]
    )
    assert message.content[0].name == long_name  # type: ignore[union-attr]
    assert message.content[0].input == {"a": 1}  # type: ignore[union-attr]


def test_count_tokens(claude: anthropic.Anthropic) -> None:
    small = claude.messages.count_tokens(
        model=MODEL, messages=[{"role": "user", "content": "Hello, Claude"}]
    )
    large = claude.messages.count_tokens(
        model=MODEL, messages=[{"role": "user", "content": "Hello, Claude " * 500}]
    )
    assert 0 < small.input_tokens < 30
    assert large.input_tokens > 50 * small.input_tokens // 10


PDF = base64.b64encode(b"%PDF-1.4\n1 0 obj <</Type /Page>> endobj\n%%EOF\n").decode()
PDF_BLOCK: dict[str, Any] = {
    "type": "document",
    "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
    "title": "report.pdf",
    "citations": {"enabled": True},
}


def test_pdf_and_text_documents(claude: anthropic.Anthropic, service: FakeKiro) -> None:
    """The PDF goes as a Kiro document named by Kiro's rule (docs/KIRO-PROTOCOL.md §2.3, rule
    21); a plain-text source is already text, and goes in the prompt, which any model reads."""
    service.enqueue(Reply(text="Read both."))
    text_document: dict[str, Any] = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "The sky is blue."},
        "title": "facts",
    }
    claude.messages.create(
        model=MODEL,
        max_tokens=100,
        messages=[
            {
                "role": "user",
                "content": [PDF_BLOCK, text_document, {"type": "text", "text": "Summarise."}],
            }
        ],
    )
    current = last_chat(service)["conversationState"]["currentMessage"]["userInputMessage"]
    sent = {"name": "report", "format": "pdf", "source": {"bytes": PDF}}
    assert current["documents"] == [sent]
    assert "<title>facts</title>\nThe sky is blue." in current["content"]


def test_a_base64_text_document_goes_as_a_txt_document(
    claude: anthropic.Anthropic, service: FakeKiro
) -> None:
    notes = base64.b64encode(b"Meeting at noon.").decode()
    block = {
        "type": "document",
        "source": {"type": "base64", "media_type": "text/plain", "data": notes},
        "title": "notes.txt",
    }
    claude.messages.create(
        model=MODEL, max_tokens=100, messages=[{"role": "user", "content": [block]}]
    )
    current = last_chat(service)["conversationState"]["currentMessage"]["userInputMessage"]
    assert current["documents"] == [{"name": "notes", "format": "txt", "source": {"bytes": notes}}]


def test_documents_go_to_claude_though_its_catalog_lists_no_document_input(
    claude: anthropic.Anthropic, service: FakeKiro
) -> None:
    """Kiro read documents on Opus 5 while no catalog entry listed DOCUMENT (rule 21); the fake's
    claude-sonnet-4.5 lists none, and was a 400 before."""
    claude.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=100,
        messages=[{"role": "user", "content": [PDF_BLOCK, {"type": "text", "text": "Read."}]}],
    )
    assert service.answered("chat")[-1].status == 200
    current = last_chat(service)["conversationState"]["currentMessage"]["userInputMessage"]
    assert current["documents"] == [{"name": "report", "format": "pdf", "source": {"bytes": PDF}}]


def test_badly_named_and_unnamed_documents_get_names_kiro_accepts(
    claude: anthropic.Anthropic, service: FakeKiro
) -> None:
    named = {**PDF_BLOCK, "title": "  Q3: results/final  (v2)é.pdf"}
    unnamed = {k: v for k, v in PDF_BLOCK.items() if k != "title"}
    claude.messages.create(
        model=MODEL,
        max_tokens=100,
        messages=[{"role": "user", "content": [named, unnamed, unnamed, PDF_BLOCK, PDF_BLOCK]}],
    )
    assert service.requests("chat")[-1].rejected_by is None
    current = last_chat(service)["conversationState"]["currentMessage"]["userInputMessage"]
    assert [document["name"] for document in current["documents"]] == [
        "Q3 results final (v2)e",
        "document-2",
        "document-3",
        "report",
        "report (2)",
    ]


def test_documents_for_a_model_that_takes_none_are_a_400(
    claude: anthropic.Anthropic, service: FakeKiro
) -> None:
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(
            model="gpt-5.6-sol",  # not Claude, and its catalog entry lists no DOCUMENT input
            max_tokens=100,
            messages=[{"role": "user", "content": [PDF_BLOCK]}],
        )
    assert caught.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert "documents (PDF and other files) are not supported" in caught.value.message
    assert service.requests("chat") == []


def test_kiros_refusal_of_a_document_is_a_400_that_says_so(
    claude: anthropic.Anthropic, service: FakeKiro
) -> None:
    service.enqueue(Script(fault=Fault.IMPROPERLY_FORMED_400))
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(
            model=MODEL, max_tokens=100, messages=[{"role": "user", "content": [PDF_BLOCK]}]
        )
    error = caught.value.body["error"]  # type: ignore[index]
    assert error["type"] == "invalid_request_error"
    assert error["message"] == (
        "Kiro refused the request, which carries 1 document (pdf), for model "
        "'claude-sonnet-4-6'; check that each file is a valid document of its type, or send its "
        "text instead"
    )
    service.enqueue(Script(fault=Fault.IMPROPERLY_FORMED_400))
    with pytest.raises(anthropic.BadRequestError) as plain:
        claude.messages.create(
            model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "hi"}]
        )
    assert "document" not in plain.value.message  # only a body with documents is said so


def test_bad_document_data_is_a_400_naming_the_field(claude: anthropic.Anthropic) -> None:
    bad = {**PDF_BLOCK, "source": {**PDF_BLOCK["source"], "data": "not base64!"}}
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(
            model=MODEL, max_tokens=100, messages=[{"role": "user", "content": [bad]}]
        )
    assert "messages.0.content.0.source.data: is not valid base64" in caught.value.message


def test_count_tokens_counts_documents(claude: anthropic.Anthropic) -> None:
    counted = claude.messages.count_tokens(
        model=MODEL, messages=[{"role": "user", "content": [PDF_BLOCK]}]
    )
    assert counted.input_tokens > 1_000  # one PDF page


def test_mid_stream_failure_ends_with_an_error_event(
    claude: anthropic.Anthropic, service: FakeKiro
) -> None:
    # Kiro's error frame, a transient failure: one leaves the module's only account in service
    # (a mid-stream ThrottlingException would rest it, as before the first event).
    service.enqueue(
        Script(reply=Reply(text="partial answer " * 5), fault=Fault.ERROR_FRAME, fault_at=3)
    )
    with (
        pytest.raises(anthropic.APIStatusError) as error,
        claude.messages.stream(
            model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "x"}]
        ) as stream,
    ):
        for _ in stream.text_stream:
            pass
    assert error.value.body["type"] == "error"  # type: ignore[index]


def test_quota_exhaustion_is_429(claude: anthropic.Anthropic, service: FakeKiro) -> None:
    service.enqueue(Script(fault=Fault.QUOTA_402))
    with pytest.raises(anthropic.RateLimitError) as error:
        claude.messages.create(
            model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "x"}]
        )
    assert error.value.body["error"]["type"] == "rate_limit_error"  # type: ignore[index]
    assert "MONTHLY_REQUEST_COUNT" in error.value.body["error"]["message"]  # type: ignore[index]


def test_context_too_long_tells_the_client_to_compact(
    claude: anthropic.Anthropic, service: FakeKiro
) -> None:
    original = next(model for model in service.models() if model.model_id == "claude-sonnet-4")
    service.set_model(dataclasses.replace(original, max_input_tokens=2_000))
    try:
        with pytest.raises(anthropic.BadRequestError) as error:
            claude.messages.create(
                model="claude-sonnet-4",
                max_tokens=100,
                messages=[{"role": "user", "content": "lorem ipsum dolor " * 1_000}],
            )
    finally:
        service.set_model(original)
    assert error.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert "prompt is too long" in error.value.body["error"]["message"]  # type: ignore[index]


def test_payload_over_kiros_size_limit_is_413(
    claude: anthropic.Anthropic, service: FakeKiro
) -> None:
    with pytest.raises(anthropic.APIStatusError) as error:
        claude.messages.create(
            model=MODEL,
            max_tokens=100,
            messages=[{"role": "user", "content": "lorem ipsum dolor " * 40_000}],
        )
    assert error.value.status_code == 413
    assert error.value.body["error"]["type"] == "request_too_large"  # type: ignore[index]
    message = error.value.body["error"]["message"]  # type: ignore[index]
    assert "over kirod's limit of 600000" in message  # kirod's, not said to be Kiro's
    assert "raise kiro_max_body_bytes" in message
    assert service.requests("chat") == []


def test_the_body_limit_is_the_kiro_max_body_bytes_option(
    fake: ThreadedFake, short_tmp: Path
) -> None:
    proc = start_daemon(short_tmp, fake, {"KIROD_KIRO_MAX_BODY_BYTES": "200000"})
    try:
        import_account(proc, fake.fake.issue_social_account())
        fake.fake.clear_requests()
        with (
            anthropic.Anthropic(base_url=proc.base_url, api_key=proc.api_key, max_retries=0) as c,
            pytest.raises(anthropic.APIStatusError) as error,
        ):
            c.messages.create(
                model=MODEL,
                max_tokens=100,
                messages=[{"role": "user", "content": "lorem ipsum dolor " * 15_000}],
            )
        assert error.value.status_code == 413
        assert "over kirod's limit of 200000" in error.value.message
        assert fake.fake.requests("chat") == []
    finally:
        proc.kill()


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ({"tool_choice": {"type": "any"}}, "not supported"),
        ({"tools": [{"type": "web_fetch_20250910", "name": "web_fetch"}]}, "web_fetch"),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}
                        ],
                    }
                ]
            },
            "image URLs are not supported",
        ),
    ],
)
def test_rejected_capabilities(
    claude: anthropic.Anthropic, service: FakeKiro, extra: dict[str, Any], needle: str
) -> None:
    request: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "x"}],
        "tools": [{"name": "a", "description": "a", "input_schema": {"type": "object"}}],
    }
    request.update(extra)
    with pytest.raises(anthropic.BadRequestError) as error:
        claude.messages.create(**request)
    assert error.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert needle in error.value.body["error"]["message"]  # type: ignore[index]
    assert service.requests("chat") == []


def test_expired_access_token_is_refreshed_transparently(
    claude: anthropic.Anthropic, service: FakeKiro, daemon: DaemonProcess
) -> None:
    account = daemon.client.request("GET", "/accounts")["accounts"][0]
    for record in service.tokens.accounts():
        service.expire_account_tokens(record.account_id)
    service.enqueue(Reply(text="after refresh"))
    message = claude.messages.create(
        model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "x"}]
    )
    assert message.content[0].text == "after refresh"  # type: ignore[union-attr]
    assert len(service.requests("social_refresh")) == 1
    after = daemon.client.request("GET", f"/accounts/{account['id']}")
    assert after["generation"] > account["generation"]


def test_kiro_sees_no_history_the_client_did_not_write(
    claude: anthropic.Anthropic, service: FakeKiro
) -> None:
    """docs/KIRO-PROTOCOL.md §2.3, rules 2-4 and 18: Kiro accepts the history as the client
    wrote it, so no acknowledgement follows the system prompt and no user entry is invented
    before an opening assistant message."""
    claude.messages.create(
        model=MODEL,
        max_tokens=100,
        system="Answer in French.",
        messages=[
            {"role": "assistant", "content": "Bonjour !"},
            {"role": "user", "content": "Hello"},
        ],
    )
    state = last_chat(service)["conversationState"]
    history = [
        (next(iter(entry)), next(iter(entry.values()))["content"]) for entry in state["history"]
    ]
    assert history == [
        ("userInputMessage", "Answer in French."),
        ("assistantResponseMessage", "Bonjour !"),
    ]
    assert state["currentMessage"]["userInputMessage"]["content"] == "Hello"
    assert service.requests("chat")[-1].rejected_by is None
