"""Public objects report the package they are imported from, not the private module that
happens to define them (as trio does).

``engine.Grouping.__module__`` is ``"engine"``, not ``"engine._model.grouping"``: tracebacks, reprs
and docs show the name users write, and pickles (a topology shipped to Spark executors, a
saved topology) refer to ``engine.Grouping``, so they survive moving a class between
private modules. Each package face calls ``publish`` once, after its imports.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from typing import Any

__all__ = ["is_private_module", "lazy_exports", "publish"]


def publish(package: str, namespace: Mapping[str, Any], names: Iterable[str]) -> None:
    """Set ``__module__`` of every class and function in ``names`` that is defined in a
    private module of the same top-level package (``engine._model.grouping``,
    ``engine.drpc._server``) to ``package``. Objects already in a public module (another
    package face, ``engine.testing.strategies``) and objects from elsewhere (another library,
    user code) are left alone.

    >>> # at the end of engine/drpc/__init__.py:
    >>> # publish(__name__, globals(), __all__)
    """
    root = package.partition(".")[0]
    for name in names:
        obj = namespace[name]
        if not isinstance(obj, (type, types.FunctionType)):
            continue
        module = getattr(obj, "__module__", None) or ""
        if module.startswith(root + ".") and is_private_module(module):
            obj.__module__ = package


def is_private_module(module: str) -> bool:
    """``engine._model.grouping`` and ``engine.drpc._server`` are private; ``engine``,
    ``engine.drpc`` and ``engine.testing.strategies`` are public."""
    return any(part.startswith("_") for part in module.split("."))


def lazy_exports(
    package: str,
    namespace: MutableMapping[str, Any],
    names: frozenset[str],
    load: Callable[[], types.ModuleType],
    extra: str,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for a package face whose ``names`` live in a private
    module needing aiohttp (an optional dependency): ``load()`` imports it on first use;
    without aiohttp the error names the extra to install.

    >>> # in engine/ui/__init__.py:
    >>> # __getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY, _load_server, "ui")
    """

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        try:
            module = load()
        except ModuleNotFoundError as exc:
            if exc.name != "aiohttp":
                raise
            raise ModuleNotFoundError(
                f"{package}.{name} needs aiohttp; install it with the {extra!r} extra "
                f"(pip install 'squall[{extra}]')",
                name="aiohttp",
            ) from exc
        value = getattr(module, name)
        publish(package, {name: value}, [name])
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | names)

    return __getattr__, __dir__
