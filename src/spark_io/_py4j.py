"""Releasing Spark's JVM objects as soon as Python is done with them.

A py4j ``JavaObject`` keeps the Java object alive in the JVM until Python frees it, and a
``JavaObject`` whose methods were called sits in a reference cycle with them (it caches
its ``JavaMember`` objects, which point back at it): only Python's cyclic collector frees
it. While a topology runs the engine collects rarely (it manages the collector for speed),
so every DataFrame a sink wrote, holding the rows it wrote in the JVM, stayed on the JVM's
heap until a full collection: a long run filled a 1 GB driver (``OutOfMemoryError: Java
heap space`` with four sink tasks). The components release what they create at once.
"""

from __future__ import annotations

from typing import Any

__all__ = ["release"]


def release(*objects: Any) -> None:
    """Let the JVM free the Java side of ``objects`` now (pyspark wrappers such as a
    ``DataFrame`` or a ``DataFrameWriter``, or py4j ``JavaObject`` s); None is skipped.
    Python must not use them afterwards."""
    for obj in objects:
        java = obj
        for attr in ("_jdf", "_jwrite", "_jrdd", "_jreader"):
            java = getattr(obj, attr, java)
        detach = getattr(java, "_detach", None)
        if detach is None:
            continue
        try:
            detach()
        except Exception:  # the gateway is gone (the session stopped): nothing to free
            continue
