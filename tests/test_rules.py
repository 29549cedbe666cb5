"""Conventions checked on the source: every task started through `kirod.tasks`
(docs/ARCHITECTURE.md §4.6), and every logger named for its module.

Ruff's banned-api catches `asyncio.create_task` and `asyncio.ensure_future` by name; this also
catches what a name check cannot: `loop.create_task(...)`, `get_running_loop().create_task(...)`
and `ensure_future` reached any other way. A `TaskGroup`'s `create_task` is allowed: the group
owns its tasks (the `async with` block waits for every one, and a failure cancels the rest),
so none can outlive its block unseen; it must still name them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "kirod"
TASKS = PACKAGE / "tasks.py"

SOURCES = sorted(path for path in PACKAGE.rglob("*.py") if path != TASKS)


def _is_task_group(expr: ast.expr) -> bool:
    """`asyncio.TaskGroup()` or `TaskGroup()`."""
    if not isinstance(expr, ast.Call):
        return False
    func = expr.func
    return (isinstance(func, ast.Attribute) and func.attr == "TaskGroup") or (
        isinstance(func, ast.Name) and func.id == "TaskGroup"
    )


def _task_groups(tree: ast.AST) -> set[str]:
    """Names bound by `async with ... TaskGroup() as name` anywhere in the module."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.AsyncWith | ast.With):
            for item in node.items:
                if _is_task_group(item.context_expr) and isinstance(item.optional_vars, ast.Name):
                    names.add(item.optional_vars.id)
    return names


def raw_task_starts(source: str, filename: str = "<source>") -> Iterator[str]:
    """`line: call` for each task started outside `kirod.tasks` and not by a named TaskGroup."""
    tree = ast.parse(source, filename)
    groups = _task_groups(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name == "ensure_future":
            yield f"{node.lineno}: ensure_future"
        elif name == "create_task":
            receiver = func.value if isinstance(func, ast.Attribute) else None
            in_group = isinstance(receiver, ast.Name) and receiver.id in groups
            named = any(keyword.arg == "name" for keyword in node.keywords)
            if not (in_group and named):
                yield f"{node.lineno}: {ast.unparse(func)}"


@pytest.mark.parametrize("path", SOURCES, ids=[str(path.relative_to(PACKAGE)) for path in SOURCES])
def test_tasks_start_only_through_kirod_tasks(path: Path) -> None:
    assert list(raw_task_starts(path.read_text(), str(path))) == []


@pytest.mark.parametrize(
    ("source", "found"),
    [
        (
            "asyncio.get_running_loop().create_task(work())",
            ["1: asyncio.get_running_loop().create_task"],
        ),
        ("loop.create_task(work(), name='x')", ["1: loop.create_task"]),
        ("asyncio.ensure_future(work())", ["1: ensure_future"]),
        ("ensure_future(work())", ["1: ensure_future"]),
        ("create_task(work())", ["1: create_task"]),
        (
            "async def f():\n"
            "    async with asyncio.TaskGroup() as group:\n"
            "        group.create_task(work(), name='one')\n",
            [],
        ),
        (
            "async def f():\n"
            "    async with asyncio.TaskGroup() as group:\n"
            "        group.create_task(work())\n",
            ["3: group.create_task"],
        ),
        ("owner.spawn(work(), name='x')", []),
    ],
)
def test_the_rule_sees_every_way_of_starting_a_task(source: str, found: list[str]) -> None:
    assert list(raw_task_starts(source)) == found


HAND_STEPPED = ("types.coroutine", ".send(None)", ".throw(")


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: str(path.relative_to(PACKAGE)))
def test_no_coroutine_is_stepped_by_hand(path: Path) -> None:
    """Coroutines are awaited, never driven with send/throw (issue 16: batches, not a
    trampoline): a hand-stepped one skips the event loop's own bookkeeping."""
    text = path.read_text()
    assert [marker for marker in HAND_STEPPED if marker in text] == []


def _logger_names(tree: ast.AST) -> Iterator[ast.expr | None]:
    """The argument of each `getLogger(...)` call (None for the root logger's bare call)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name == "getLogger":
                yield node.args[0] if node.args else None


def _allowed_logger_name(arg: ast.expr | None) -> bool:
    """`__name__`, the root logger, or a name from `kirod.log`'s table of public names."""
    if arg is None:
        return True
    if isinstance(arg, ast.Name):
        return arg.id in {"__name__", "ROOT"}
    return isinstance(arg, ast.Attribute) and arg.attr in {"ACCESS", "ROOT"}


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: str(path.relative_to(PACKAGE)))
def test_each_logger_is_named_for_its_module(path: Path) -> None:
    """A log line's logger names its module; the few stable public names (the access log) come
    from the one table in `kirod.log`, never from a string written in place."""
    for arg in _logger_names(ast.parse(path.read_text(), str(path))):
        assert _allowed_logger_name(arg), f"{path.name}: getLogger({ast.unparse(arg)})"  # type: ignore[arg-type]


def test_the_public_logger_names_are_one_table_under_the_root() -> None:
    from kirod import log

    assert log.ACCESS in log.PUBLIC_LOGGERS
    assert len(set(log.PUBLIC_LOGGERS)) == len(log.PUBLIC_LOGGERS)
    assert all(name.startswith(log.ROOT + ".") for name in log.PUBLIC_LOGGERS)


def test_a_logger_named_in_place_is_caught() -> None:
    tree = ast.parse('logger = logging.getLogger("kirod.http")')
    assert not any(_allowed_logger_name(arg) for arg in _logger_names(tree))
