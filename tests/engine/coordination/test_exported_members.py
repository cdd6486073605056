"""engine.coordination's public surface is what it claims."""

import engine.coordination

from .surface import check_package


def test_public_surface() -> None:
    check_package(engine.coordination)
