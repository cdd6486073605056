"""Copying components per task: in-process, with ``copy.deepcopy``, like Storm's
serialization but without needing an importable name (classes defined in a function,
closures and lambdas copy fine). What cannot be copied is refused naming the attribute."""

from __future__ import annotations

import copy
from typing import Any

from ._errors import InvalidComponentError

__all__ = ["copy_component"]


def copy_component(component: Any, what: str) -> Any:
    """A private copy of ``component`` for one task (or sending task), made in-process
    with ``copy.deepcopy``: classes defined in a function, closures and lambdas need no
    importable name. What cannot be copied is refused naming ``what`` and the attribute
    at fault."""
    try:
        return copy.deepcopy(component)
    except Exception as exc:
        raise InvalidComponentError(
            f"{what} ({type(component).__name__}) cannot be copied for each task: "
            f"{_uncopyable_part(component, exc)}. Components are copied per task like "
            f"Storm's; create such state (connections, locks, open files, threads) in "
            f"open()/prepare() instead"
        ) from exc


def _uncopyable_part(component: Any, exc: Exception) -> str:
    """Which attribute of ``component`` (walked into nested objects) ``deepcopy`` refuses."""
    path = ""
    obj = component
    seen: set[int] = set()
    while id(obj) not in seen:
        seen.add(id(obj))
        try:
            attrs = vars(obj)
        except TypeError:
            break
        for name, value in attrs.items():
            try:
                copy.deepcopy(value)
            except Exception as inner:
                path, obj, exc = f"{path}.{name}", value, inner
                break
        else:
            break
    if not path:
        return f"{exc}"
    return f"attribute {path.lstrip('.')!r} ({type(obj).__name__}): {exc}"
