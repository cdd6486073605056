"""Public objects report the package they are imported from, not the private module that
happens to define them (as trio does).

``engine.Grouping.__module__`` is ``"engine"``, not ``"engine._model.grouping"``: tracebacks, reprs
and docs show the name users write, and pickles (a topology shipped to Spark executors, a
saved topology) refer to ``engine.Grouping``, so they survive moving a class between
private modules. Each package face calls ``publish`` once, after its imports.
"""

from __future__ import annotations

import importlib
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
    homes: Mapping[str, str],
    *,
    extra: str | None = None,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` (PEP 562) for a package face whose names in ``homes``
    (name -> the private module holding it, relative to ``package``) load on first use.

    The first use of a name imports its module and publishes every lazy name of that module
    at once, so ``__module__`` is the package whichever name came first, and caches them in
    ``namespace`` so later lookups skip ``__getattr__``. With ``extra``, a module that needs
    aiohttp (an optional dependency) fails naming the extra to install.

    >>> # in engine/ui/__init__.py:
    >>> # __getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY, extra="ui")
    """

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        try:
            module = importlib.import_module(home, package)
        except ModuleNotFoundError as exc:
            if extra is None or exc.name != "aiohttp":
                raise
            raise ModuleNotFoundError(
                f"{package}.{name} needs aiohttp; install it with the {extra!r} extra "
                f"(pip install 'squall[{extra}]')",
                name="aiohttp",
            ) from exc
        names = [lazy for lazy, where in homes.items() if where == home]
        values = {lazy: getattr(module, lazy) for lazy in names}
        publish(package, values, names)
        namespace.update(values)
        return values[name]

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(homes))

    return __getattr__, __dir__
