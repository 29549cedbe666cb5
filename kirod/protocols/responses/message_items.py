"""Message items and their content parts, both ways.

Decoding: a message's `content`, a string or a list of parts, becomes canonical blocks: the text
parts (`input_text`, `output_text`, `refusal`; empty ones skipped) and, where attachments are
allowed (user messages, tool outputs), `input_image` and `input_file` parts sent inline as data
URLs. Encoding: an assistant `message` item with one `output_text` part.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kirod.canonical.request import DocumentBlock, ImageBlock, TextBlock
from kirod.protocols.fields import (
    BlockBudget,
    data_url_document,
    data_url_image,
    invalid,
    is_object,
    quoted,
    string_field,
    unsupported,
)

_TEXT_TYPES: Final = frozenset({"input_text", "output_text", "refusal"})


def content_parts(
    content: object, path: str, budget: BlockBudget, *, attachments: bool
) -> list[TextBlock | ImageBlock | DocumentBlock]:
    """Text parts (and images and files where `attachments`); empty texts are skipped."""
    if isinstance(content, str):
        budget.spend(1, path)
        return [TextBlock(content)] if content else []
    if not isinstance(content, list):
        raise invalid(path, "content must be a string or a list of content parts", "invalid_type")
    budget.spend(len(content), path)
    blocks: list[TextBlock | ImageBlock | DocumentBlock] = []
    for index, part in enumerate(content):
        if part.__class__ is dict:  # the usual part, a text, read before its path is made
            kind = part.get("type")
            if kind.__class__ is str and kind in _TEXT_TYPES:
                text = part.get("refusal" if kind == "refusal" else "text")
                if text.__class__ is str:
                    if text:
                        blocks.append(TextBlock(text))
                    continue
        part_path = f"{path}[{index}]"
        if not is_object(part):
            raise invalid(part_path, "each content part must be an object", "invalid_type")
        kind = part.get("type")
        if not isinstance(kind, str):
            raise invalid(f"{part_path}.type", "must be a string", "invalid_type")
        if kind in _TEXT_TYPES:
            field = "refusal" if kind == "refusal" else "text"
            text = string_field(part, field, part_path, required=True)
            if text:
                blocks.append(TextBlock(text))
        elif kind == "input_image" and attachments:
            blocks.append(_image(part, part_path))
        elif kind == "input_file" and attachments:
            blocks.append(_file(part, part_path))
        else:
            raise invalid(
                f"{part_path}.type", f"content part type {quoted(kind)} is not allowed here"
            )
    return blocks


def _image(part: Mapping[str, Any], path: str) -> ImageBlock:
    if part.get("file_id") is not None:
        raise unsupported(
            f"{path}.file_id",
            "file ids are not supported; send the image inline as a base64 data URL",
        )
    url = string_field(part, "image_url", path, required=True)
    assert url is not None
    return data_url_image(url, f"{path}.image_url")


def _file(part: Mapping[str, Any], path: str) -> DocumentBlock:
    """An inline `file_data` data URL; `detail` is accepted and has no effect."""
    for key in ("file_id", "file_url"):
        if part.get(key) is not None:
            raise unsupported(
                f"{path}.{key}",
                "kirod cannot fetch files; send the file inline as file_data "
                "(data:application/pdf;base64,…) with a filename",
            )
    data = string_field(part, "file_data", path, required=True)
    assert data is not None
    return data_url_document(data, part.get("filename"), f"{path}.file_data", f"{path}.filename")


def text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def message_item(msg_id: str, text: str | None, status: str) -> dict[str, Any]:
    """An assistant message with one output_text part (none yet when `text` is None)."""
    return {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": [] if text is None else [text_part(text)],
    }
