"""engine.coordination's public surface is what it claims."""

import pytest

import engine.coordination
import engine.drpc

from .surface import check_package


def test_public_surface() -> None:
    check_package(engine.coordination, internal=frozenset({"task_random"}))


def test_a_name_a_private_module_exports_but_the_face_forgets_is_caught() -> None:
    with pytest.raises(AssertionError) as info:
        check_package(engine.coordination)
    assert "engine.coordination: not re-exported" in str(info.value)
    with pytest.raises(AssertionError):  # a stale allowance is caught too
        check_package(engine.coordination, internal=frozenset({"task_random", "gone"}))
    with pytest.raises(AssertionError):
        check_package(engine.drpc, lazy=frozenset({"DRPCHttpServer", "make_drpc_app"}))
