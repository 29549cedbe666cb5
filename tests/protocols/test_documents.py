"""Documents (PDF, Office and text files) in all three decoders, and their token estimate."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from kirod.canonical.request import DocumentBlock, Message, Role, TextBlock, ToolResultBlock
from kirod.canonical.token_count import (
    PDF_PAGE_TOKENS,
    estimate_document_tokens,
    estimate_request_tokens,
    estimate_text_tokens,
)
from kirod.errors import ApiError, ErrorKind
from kirod.protocols.anthropic import ThinkingSigner, decode_count_tokens, decode_messages
from kirod.protocols.chat.decode import decode_chat
from kirod.protocols.fields import MAX_DOCUMENT_BYTES, MAX_DOCUMENT_NAME
from kirod.protocols.responses.decode import decode_responses
from kirod.protocols.responses.reasoning import ReasoningBox

SIGNER = ThinkingSigner(b"document-test-secret-0123456789")
PDF_BYTES = (
    b"%PDF-1.4\n1 0 obj <</Type /Pages /Kids [2 0 R 3 0 R] /Count 2>> endobj\n"
    b"2 0 obj <</Type /Page>> endobj\n3 0 obj <</Type/Page>> endobj\n%%EOF\n"
)
PDF = base64.b64encode(PDF_BYTES).decode()
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
OVERSIZED = "A" * (MAX_DOCUMENT_BYTES // 3 * 4 + 8)

Body = dict[str, Any]


def anthropic(*blocks: Body, role: str = "user") -> Body:
    return {
        "model": "claude-sonnet-4-6",
        "max_tokens": 100,
        "messages": [{"role": role, "content": list(blocks)}],
    }


def document(media_type: str = "application/pdf", data: str = PDF, **extra: Any) -> Body:
    source = {"type": "base64", "media_type": media_type, "data": data}
    return {"type": "document", "source": source, **extra}


def first(body: Body) -> Any:
    request = decode_messages(body, {}, request_id="req", signer=SIGNER)
    return request.messages[0].content[0]


# -- Anthropic -------------------------------------------------------------------------------------


def test_anthropic_base64_pdf_with_title_context_and_citations() -> None:
    block = document(title="Q3 report", context="from finance", citations={"enabled": True})
    assert first(anthropic(block)) == DocumentBlock("Q3 report", "pdf", PDF, "from finance")


@pytest.mark.parametrize(
    ("media_type", "expected"),
    [("text/plain", "txt"), ("text/csv", "csv"), (DOCX, "docx"), ("Application/PDF", "pdf")],
)
def test_anthropic_media_types_map_to_kiro_formats(media_type: str, expected: str) -> None:
    assert first(anthropic(document(media_type))) == DocumentBlock("", expected, PDF)


def test_anthropic_text_document_becomes_prompt_text() -> None:
    source = {"type": "text", "media_type": "text/plain", "data": "The sky is blue."}
    block = {"type": "document", "source": source, "title": "Facts", "context": "a note"}
    assert first(anthropic(block)) == TextBlock(
        "<document>\n<title>Facts</title>\n<context>a note</context>\nThe sky is blue.\n</document>"
    )


def test_anthropic_document_inside_a_tool_result() -> None:
    body = anthropic({"type": "text", "text": "read it"})
    body["messages"] += [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "R", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t", "content": [document()]}],
        },
    ]
    request = decode_messages(body, {}, request_id="req", signer=SIGNER)
    assert request.messages[2] == Message(
        Role.USER, (ToolResultBlock("t", (DocumentBlock("", "pdf", PDF),)),)
    )


@pytest.mark.parametrize(
    ("block", "param", "code"),
    [
        (document("application/zip"), "messages.0.content.0.source.media_type", None),
        (document(data="not base64!"), "messages.0.content.0.source.data", None),
        (document(data=OVERSIZED), "messages.0.content.0.source.data", None),
        (document(title="x" * (MAX_DOCUMENT_NAME + 1)), "messages.0.content.0.title", None),
        (
            {"type": "document", "source": {"type": "url", "url": "https://x/a.pdf"}},
            "messages.0.content.0.source.type",
            "unsupported_capability",
        ),
        (
            {"type": "document", "source": {"type": "file", "file_id": "f"}},
            "messages.0.content.0.source.type",
            "unsupported_capability",
        ),
        (
            {"type": "document", "source": {"type": "pages"}},
            "messages.0.content.0.source.type",
            None,
        ),
        (
            {"type": "document", "source": {"type": "text"}},
            "messages.0.content.0.source.data",
            None,
        ),
    ],
)
def test_anthropic_bad_documents_name_the_field(block: Body, param: str, code: str | None) -> None:
    with pytest.raises(ApiError) as caught:
        first(anthropic(block))
    assert caught.value.kind is ErrorKind.INVALID_REQUEST
    assert (caught.value.param, caught.value.code) == (param, code)
    assert caught.value.message.startswith(f"{param}: ")


def test_count_tokens_counts_documents() -> None:
    def count(*blocks: Body) -> int:
        return estimate_request_tokens(decode_count_tokens(anthropic(*blocks), {}, "req", SIGNER))

    text = {"type": "text", "text": "Summarise."}
    assert count(text, document()) - count(text) == 2 * PDF_PAGE_TOKENS
    assert count(text, document(context="finance")) > count(text, document())


# -- token estimates -------------------------------------------------------------------------------


def test_document_token_estimates() -> None:
    words = "The quick brown fox jumps over the lazy dog.\n" * 20
    text = DocumentBlock("notes", "txt", base64.b64encode(words.encode()).decode())
    assert estimate_document_tokens(text) == estimate_text_tokens(words)
    assert estimate_document_tokens(DocumentBlock("r", "pdf", PDF)) == 2 * PDF_PAGE_TOKENS
    no_pages = base64.b64encode(b"%PDF-1.7 compressed objects").decode()
    assert estimate_document_tokens(DocumentBlock("r", "pdf", no_pages)) == PDF_PAGE_TOKENS
    office = base64.b64encode(bytes(1000)).decode()
    assert estimate_document_tokens(DocumentBlock("s", "xlsx", office)) == 500


# -- OpenAI Responses and Chat ---------------------------------------------------------------------


def responses(*parts: Body, role: str = "user") -> Any:
    body = {
        "model": "claude-sonnet-4-6",
        "input": [{"type": "message", "role": role, "content": list(parts)}],
    }
    decoded = decode_responses(
        body, {}, request_id="req", reasoning_box=ReasoningBox(bytes(range(32)))
    )
    return decoded.request.messages[0].content[0]


def chat(*parts: Body) -> Any:
    body = {"model": "claude-sonnet-4-6", "messages": [{"role": "user", "content": list(parts)}]}
    return decode_chat(body, {}, request_id="req").request.messages[0].content[0]


def test_responses_input_file_data_url() -> None:
    part = {
        "type": "input_file",
        "filename": "report.pdf",
        "file_data": f"data:application/pdf;base64,{PDF}",
        "detail": "high",
    }
    assert responses(part) == DocumentBlock("report.pdf", "pdf", PDF)


def test_a_generic_media_type_takes_the_format_from_the_file_name() -> None:
    part = {
        "type": "input_file",
        "filename": "table.CSV",
        "file_data": f"data:application/octet-stream;base64,{PDF}",
    }
    assert responses(part) == DocumentBlock("table.CSV", "csv", PDF)


def test_chat_file_part() -> None:
    part = {
        "type": "file",
        "file": {"filename": "notes.md", "file_data": f"data:text/markdown;base64,{PDF}"},
    }
    assert chat(part) == DocumentBlock("notes.md", "md", PDF)


@pytest.mark.parametrize(
    ("part", "param", "code"),
    [
        (
            {"type": "input_file", "file_data": "JVBERi0="},
            "input[0].content[0].file_data",
            "invalid_value",
        ),
        (
            {"type": "input_file", "file_data": "data:application/zip;base64,UEsDBA=="},
            "input[0].content[0].file_data",
            "invalid_value",
        ),
        (
            {"type": "input_file", "file_data": "data:application/pdf;base64,not base64!"},
            "input[0].content[0].file_data",
            "invalid_value",
        ),
        (
            {"type": "input_file", "file_data": f"data:application/pdf;base64,{OVERSIZED}"},
            "input[0].content[0].file_data",
            "string_too_long",
        ),
        (
            {"type": "input_file", "filename": 5, "file_data": f"data:text/plain;base64,{PDF}"},
            "input[0].content[0].filename",
            "invalid_type",
        ),
        ({"type": "input_file"}, "input[0].content[0].file_data", "missing_required_parameter"),
    ],
)
def test_responses_bad_files_name_the_field(part: Body, param: str, code: str) -> None:
    with pytest.raises(ApiError) as caught:
        responses(part)
    assert (caught.value.param, caught.value.code) == (param, code)
    assert caught.value.message.startswith(f"'{param}': ")


def test_files_belong_to_user_messages() -> None:
    part = {"type": "input_file", "file_data": f"data:application/pdf;base64,{PDF}"}
    with pytest.raises(ApiError) as caught:
        responses(part, role="assistant")
    assert caught.value.param == "input[0].content[0].type"
