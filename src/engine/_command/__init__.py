"""The engine's side of the ``squall`` command: ``run``, ``visualize``, ``submit`` and the
progress line (the client commands live in ``squall_cli``).

The top floor: it may import every other layer, and none imports it.
"""
