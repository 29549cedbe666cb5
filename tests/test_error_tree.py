"""Every `KirodError` subclass in kirod is drawn in the error tree of `kirod.errors`' docstring,
and every `Failure` class in the one of `kirod.upstream.errors`."""

from __future__ import annotations

import importlib
import pkgutil
import re

import kirod
import kirod.errors
import kirod.upstream.errors
from kirod.errors import KirodError
from kirod.upstream.errors import Failure


def _subclasses(cls: type[KirodError]) -> set[type[KirodError]]:
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= _subclasses(sub)
    return found


def test_every_kirod_error_is_in_the_drawing() -> None:
    for module in pkgutil.walk_packages(kirod.__path__, "kirod."):
        # `__main__` modules run their program when imported.
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    drawn = set(re.findall(r"\w+", kirod.errors.__doc__ or ""))
    missing = sorted(
        f"{cls.__module__}.{cls.__name__}"
        for cls in _subclasses(KirodError)
        if cls.__module__.startswith("kirod.") and cls.__name__ not in drawn
    )
    assert not missing, f"draw these in kirod/errors.py's docstring: {missing}"


def test_every_failure_class_is_in_the_upstream_drawing() -> None:
    drawn = set(re.findall(r"\w+", kirod.upstream.errors.__doc__ or ""))
    missing = sorted(failure.value for failure in Failure if failure.value not in drawn)
    assert not missing, f"draw these in kirod/upstream/errors.py's docstring: {missing}"
