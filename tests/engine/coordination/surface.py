"""Checks that a package's public surface is what it claims (shared by the coordination,
drpc and transactional tests): a sorted ``__all__`` naming real objects, every public name
of the face exported, every private module's ``__all__`` sorted too, and errors drawn as a
tree that matches the classes."""

from __future__ import annotations

import builtins
import importlib
import pkgutil
import re
import types

import engine

_TREE_LINE = re.compile(r"^[│├└─ ]*(?P<name>[A-Z]\w+)(?: \((?P<bases>[\w, ]+)\))?")


def isort_order(name: str) -> tuple[int, str]:
    if name.isupper():
        return (0, name)
    if name[0].isupper():
        return (1, name)
    return (2, name)


def check_all(module: types.ModuleType) -> None:
    names = list(module.__all__)
    assert names == sorted(names, key=isort_order), module.__name__
    assert len(set(names)) == len(names)
    assert [n for n in names if not hasattr(module, n)] == []


def check_package(
    package: types.ModuleType,
    lazy: frozenset[str] = frozenset(),
    internal: frozenset[str] = frozenset(),
) -> None:
    """``internal``: the names private modules list in ``__all__`` that the package face
    deliberately does not export; every other one must be exported, as the same object."""
    check_all(package)
    public = {
        name
        for name, value in vars(package).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public | lazy == set(package.__all__)
    not_exported: set[str] = set()
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        assert info.name.startswith("_"), f"{module.__name__} should be private"
        check_all(module)
        for name in module.__all__:
            if name not in package.__all__:
                not_exported.add(name)
            else:
                exported = getattr(package, name)
                assert exported is getattr(module, name), f"{package.__name__}.{name}"
    assert not_exported == set(internal), f"{package.__name__}: not re-exported"


def check_error_tree(errors_module: types.ModuleType) -> None:
    """The docstring's tree: ``Name (Base, ...)`` at the root, ``Name`` or ``Name (Builtin)``
    below its parent; each class's bases are exactly what is drawn."""
    assert errors_module.__doc__ is not None
    stack: list[str] = []
    drawn: dict[str, set[type]] = {}
    for line in errors_module.__doc__.splitlines():
        if not line.startswith("    ") or not line.strip():
            continue
        match = _TREE_LINE.match(line[4:])
        if match is None:
            continue
        depth = match.start("name") // 4
        del stack[depth:]
        bases: set[type] = set()
        if stack:
            bases.add(getattr(errors_module, stack[-1]))
        for base in (match["bases"] or "").split(","):
            base = base.strip()
            if base:
                bases.add(getattr(builtins, base, None) or getattr(engine, base))
        drawn[match["name"]] = bases
        stack.append(match["name"])
    assert set(drawn) == set(errors_module.__all__)
    for name, bases in drawn.items():
        assert set(getattr(errors_module, name).__bases__) == bases, name
        assert issubclass(getattr(errors_module, name), engine.SquallError)
