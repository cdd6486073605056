"""Lazy package faces (PEP 562) for ``spark_io`` and ``spark_io.runner``.

Spark starts a fresh Python process for each streaming source of a query and unpickles one
reader in it before the query's first micro-batch: every module that unpickling imports
delays the start. A face that imports its modules eagerly would load the runner's compiler,
and with it the engine's runtime, numpy and Numba, for a reader that needs none of them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

__all__ = ["lazy_face"]


def lazy_face(
    package: str, namespace: MutableMapping[str, Any], homes: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, whose public names in ``homes`` (name
    -> the module defining it, relative to ``package``) are imported on first use and then
    cached in ``namespace`` (the package's globals).

    >>> # in spark_io/runner/__init__.py:
    >>> # __getattr__, __dir__ = lazy_face(__name__, globals(), _LAZY)
    """

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(homes))

    return __getattr__, __dir__
