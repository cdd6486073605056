"""Choosing a state store from the topology's config (``topology.state.provider``).

=====================================================  =====================================
``topology.state.provider``                            store
=====================================================  =====================================
``None``, ``"memory"``, Storm's                        ``InMemoryStateStore``: this process
``org.apache.storm.state.InMemoryKeyValueStateProvider``
``"sqlite"``                                           ``SqliteStateStore``: the embedded
                                                       durable store; the config is its path
``"redis"``, storm-redis's                             ``RedisStateStore``; the config is a
``org.apache.storm.redis.state.RedisKeyValueStateProvider``  URL or a mapping (host, port, ...)
=====================================================  =====================================

``topology.state.provider.config`` is Storm's key; a JSON string is accepted for a mapping,
as Storm's providers read it. Namespaces are ``<topology name>/<component>/<task index>``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .._model.config import (
    STATE_PROVIDER_ALIASES,
    TOPOLOGY_STATE_PROVIDER,
    TOPOLOGY_STATE_PROVIDER_CONFIG,
)
from ._store import InMemoryStateStore, StateStore

__all__ = ["open_state_store", "state_namespace"]


def state_namespace(conf: Mapping[str, Any], component_id: str, task_index: int) -> str:
    """Where a task's state lives: stable across restarts of the same topology name."""
    return f"{conf.get('topology.name') or 'topology'}/{component_id}/{task_index}"


def open_state_store(conf: Mapping[str, Any], namespace: str) -> StateStore:
    """The store of ``namespace`` from the provider the config names (validated on submit)."""
    provider = STATE_PROVIDER_ALIASES[conf.get(TOPOLOGY_STATE_PROVIDER)]
    config = conf.get(TOPOLOGY_STATE_PROVIDER_CONFIG)
    if provider == "sqlite":
        from ._sqlite import SqliteStateStore

        path = config.get("path") if isinstance(config, Mapping) else config
        return SqliteStateStore(str(path), namespace)
    if provider == "redis":
        from ._redis_store import RedisStateStore

        if isinstance(config, str) and config.lstrip().startswith("{"):
            config = json.loads(config)
        return RedisStateStore(config, namespace)
    return InMemoryStateStore(namespace, scope="" if config is None else str(config))
