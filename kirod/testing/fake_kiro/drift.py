"""The fake's drift switch: Kiro as it may answer tomorrow, one change at a time.

Each member is a change of the kind that has reached Kiro's users without notice before: event
types added (docs/KIRO-PROTOCOL.md §3.2), reasons added (docs/KIRO-PROTOCOL.md §4), a window
grown per account (docs/KIRO-PROTOCOL.md §6.2), catalog fields added
(docs/KIRO-PROTOCOL.md §2.7). Switched on (`FakeKiro.drifts`, `PUT /__fake__/drift`), the fake
answers with that change on top of today's behaviour, so a test can check that kirod keeps
serving, records exactly one drift of the matching kind (`kirod.drift.Kind`) and stores nothing
identifying. Off (the default), the fake is today's Kiro.
"""

from __future__ import annotations

import enum


class Drift(enum.Enum):
    """A change in Kiro's answers; the value says what the fake then sends."""

    EVENT_TYPE = "the chat stream carries an event type kirod does not read, before the tail"
    STOP_REASON = "metadataEvent carries a stopReason kirod does not know"
    ERROR_REASON = "a chat answers 429 ThrottlingException with a reason kirod does not know"
    HTTP_STATUS = "a chat answers a status no Kiro endpoint has been seen to send"
    TAIL_MISSING = "the chat stream ends cleanly after its content, without the tail frames"
    CATALOG_FIELD = "ListAvailableModels lists a field, input type and schema key kirod ignores"
    SCHEMA_REFUSAL = "a chat with root additionalModelRequestFields gets REQUEST_BODY_INVALID"
    WINDOW = "every account's window for a Claude model listed at 200 000 is 1 000 000"
    USAGE_FIELD = "getUsageLimits answers with a field kirod does not read"
