"""Field checks for the Messages decoder, failing in Anthropic's error envelope.

Each problem is a 400 whose message and `param` name the field path
(`messages.2.content.0.source.type`); what kirod cannot provide is refused with code
`unsupported_capability` rather than approximated. `invalid` and `unsupported` build the error
for the caller to raise; `check`'s methods raise it themselves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from kirod.errors import ApiError, ErrorKind
from kirod.protocols.fields import MAX_BLOCKS, BlockBudget, Checks

UNSUPPORTED: Final = "unsupported_capability"


def invalid(path: str, problem: str, _code: str = "") -> ApiError:
    # Anthropic's error envelope has no code: the type and the `path: problem` message say it.
    return ApiError(ErrorKind.INVALID_REQUEST, f"{path}: {problem}", param=path)


check: Final = Checks(invalid)


def unsupported(path: str, problem: str) -> ApiError:
    return ApiError(ErrorKind.INVALID_REQUEST, f"{path}: {problem}", code=UNSUPPORTED, param=path)


def type_of(block: Mapping[str, Any], path: str) -> str:
    return check.text(block.get("type"), f"{path}.type")


def counted(items: list[Any], limit: int, path: str, what: str) -> list[Any]:
    if len(items) > limit:
        raise invalid(path, f"at most {limit} {what} are allowed ({len(items)} sent)")
    return items


def spend(budget: BlockBudget, count: int, path: str) -> None:
    if not budget.take(count):
        raise invalid(path, f"at most {MAX_BLOCKS} content blocks are allowed in one request")


def choices(values: Iterable[str]) -> str:
    return ", ".join(f"'{value}'" for value in sorted(values))
