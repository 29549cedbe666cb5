"""Mask e-mail addresses and API-key-like strings in a request's text before it goes upstream.

    [extensions.redactor]
    replacement = "[redacted]"   # what each match becomes
    emails = true                # mask e-mail addresses
    keys = true                  # mask sk-… and AKIA… keys

It fails closed (`on_failure = "fail"`): a request it could not redact is not sent.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from kirod.extension import (
    Block,
    CanonicalRequest,
    Extension,
    Message,
    OptionSpec,
    TextBlock,
    ToolResultBlock,
)

EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
# OpenAI and Anthropic secret keys (sk-…, sk-proj-…, sk-ant-…) and AWS access key ids.
API_KEY = re.compile(r"\bsk-[A-Za-z0-9_-]{16,}|\bAKIA[0-9A-Z]{16}\b")


class Redactor(Extension):
    priority = 10  # before any extension that might log or route on the text
    on_failure = "fail"
    schema = {
        "replacement": OptionSpec(str, "[redacted]", help="what each match becomes"),
        "emails": OptionSpec(bool, True, help="mask e-mail addresses"),
        "keys": OptionSpec(bool, True, help="mask sk-… and AKIA… keys"),
    }

    def __init__(self, options: Mapping[str, Any]) -> None:
        super().__init__(options)
        self._patterns = [
            pattern
            for pattern, on in ((EMAIL, options["emails"]), (API_KEY, options["keys"]))
            if on
        ]
        self._replacement = str(options["replacement"])

    def redact(self, text: str) -> str:
        for pattern in self._patterns:
            text = pattern.sub(self._replacement, text)
        return text

    def on_request(self, request: CanonicalRequest) -> CanonicalRequest:
        system = tuple(self.redact(part) for part in request.system)
        messages = tuple(self._message(message) for message in request.messages)
        if system == request.system and messages == request.messages:
            return request  # nothing to mask: the request is not counted as changed
        return dataclasses.replace(request, system=system, messages=messages)

    def _message(self, message: Message) -> Message:
        content = tuple(self._block(block) for block in message.content)
        return message if content == message.content else Message(message.role, content)

    def _block(self, block: Block) -> Block:
        if isinstance(block, TextBlock):
            return TextBlock(self.redact(block.text))
        if isinstance(block, ToolResultBlock):
            parts = tuple(
                TextBlock(self.redact(part.text)) if isinstance(part, TextBlock) else part
                for part in block.content
            )
            return dataclasses.replace(block, content=parts)
        return block
