"""``engine``'s face loads the model eagerly and the machinery on first use, so a process
that only builds or unpickles a topology (the Python process Spark starts for each streaming
source) does not pay for numpy, Numba and the acker's compiled kernels."""

from __future__ import annotations

import pytest

import engine
from tests import fresh_interpreter

HEAVY = ("numba", "acker_kernel", "numpy", "pyspark")


def loaded_after(code: str) -> list[str]:
    """The heavy top-level packages in ``sys.modules`` after a fresh interpreter runs ``code``."""
    return fresh_interpreter.loaded_after(code, HEAVY)


@pytest.mark.parametrize(
    "code",
    [
        "import engine",
        "import engine._model.errors",
        "from engine import Fields, Spout, TopologyBuilder, SquallRuntimeError, Clock",
        "import engine.testing",
        "from engine.testing import simulate, FiniteSpout, CrashTask",
        "import engine.redis",
    ],
)
def test_the_model_loads_without_the_machinery(code: str) -> None:
    assert loaded_after(code) == []


def test_a_machinery_name_loads_its_module_on_first_use() -> None:
    assert loaded_after("import engine\nengine.LocalCluster") == ["acker_kernel", "numba", "numpy"]


def test_star_import_gives_every_public_name_reporting_engine_as_its_module() -> None:
    namespace: dict[str, object] = {}
    exec("from engine import *", namespace)
    assert set(engine.__all__) <= set(namespace)
    for name in ("LocalCluster", "OutputCollector", "TupleBatch", "TopologyInfo", "run_topology"):
        assert namespace[name].__module__ == "engine", name  # type: ignore[attr-defined]


def test_lazy_names_of_one_module_are_published_together() -> None:
    script = (
        "import engine\n"
        "engine.OutputCollector\n"
        "from engine._execution import collector\n"
        "print(collector.SpoutOutputCollector.__module__)\n"
    )
    done = fresh_interpreter.run_fresh(script)
    assert done.stdout.strip() == "engine", done.stderr


def test_dir_lists_lazy_names_and_unknown_names_raise() -> None:
    assert set(engine.__all__) <= set(dir(engine))
    with pytest.raises(AttributeError, match=r"^module 'engine' has no attribute 'Nope'$"):
        engine.Nope  # noqa: B018


def test_complete_topology_loads_the_runtime_on_first_use() -> None:
    script = "import engine.testing\nengine.testing.complete_topology"
    assert loaded_after(script) == ["acker_kernel", "numba", "numpy"]
    done = fresh_interpreter.run_fresh(
        "from engine.testing import FixedTupleSpout\nprint(FixedTupleSpout.__module__)"
    )
    assert done.stdout.strip() == "engine.testing", done.stderr
