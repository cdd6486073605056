"""Copying components per task, in-process, like Storm's serialization: with pickle when
the component pickles (fast, and what shipping a topology elsewhere needs), else with
``copy.deepcopy``, which needs no importable name (classes defined in a function, closures
and lambdas copy fine). What cannot be copied either way is refused naming the attribute."""

from __future__ import annotations

import copy
import pickle
from typing import Any

from .errors import InvalidComponentError

__all__ = ["check_copyable", "copy_component", "serialize_component"]


def copy_component(component: Any, what: str, serialized: tuple[Any, bytes] | None = None) -> Any:
    """A private copy of ``component`` for one task (or sending task): unpickled from
    ``serialized`` when that was made of this very object (``serialize_component``), else
    pickled and unpickled when it pickles (several times faster than ``deepcopy`` on large
    data), else ``copy.deepcopy``. What cannot be copied is refused naming ``what`` and
    the attribute at fault."""
    if serialized is not None and serialized[0] is component:
        return pickle.loads(serialized[1])
    try:
        return pickle.loads(pickle.dumps(component, pickle.HIGHEST_PROTOCOL))
    except Exception:
        return _deepcopy(component, what)


def serialize_component(component: Any, what: str) -> tuple[Any, bytes] | None:
    """``(component, its pickle)``, which every task's copy of that object is made from (as
    Storm serializes a topology's components when it is created: what the object becomes
    afterwards is not what runs), or None when it copies only by ``deepcopy``. Raises
    ``InvalidComponentError`` (naming ``what`` and the attribute at fault) when it cannot
    be copied either way."""
    try:
        return component, pickle.dumps(component, pickle.HIGHEST_PROTOCOL)
    except Exception:
        _deepcopy(component, what)
        return None


def check_copyable(component: Any, what: str) -> None:
    """Raise ``InvalidComponentError`` (naming ``what`` and the attribute at fault) unless
    ``copy_component`` can copy ``component``."""
    serialize_component(component, what)


def _deepcopy(component: Any, what: str) -> Any:
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
