"""engine.transactional's public surface is what it claims."""

import engine.transactional
from engine.transactional import _errors

from ..coordination.surface import check_error_tree, check_package


def test_public_surface() -> None:
    check_package(engine.transactional)
    check_error_tree(_errors)
