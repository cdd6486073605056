"""``RedisStateStore``: state in Redis (``topology.state.provider = "redis"``), like
storm-redis's ``RedisKeyValueStateProvider``.

Per namespace, three Redis keys (``prefix`` defaults to ``squall:state:``):
``<prefix><namespace>`` is a hash of the committed entries, ``<prefix><namespace>:prepared``
a hash of the prepared transaction (an empty value is a delete; stored values are never
empty, they start with the format version) and ``<prefix><namespace>:txid`` a hash with
``prepared`` and ``committed``. A commit is one ``MULTI``/``EXEC``, so Redis holds either the
old or the new committed state; the store that prepared a transaction commits it from the
changes it sent (they cross the network once), a recovery's commit reads them back. The
store uses the synchronous ``redis`` client: it is called at checkpoints only, between two
tuples.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

from ._errors import StateError
from ._store import StateStore

__all__ = ["RedisStateStore"]

_T = TypeVar("_T")

DEFAULT_PREFIX = "squall:state:"


class RedisStateStore(StateStore):
    """One namespace in Redis. ``config``: a ``redis://`` URL, or a mapping with ``host``,
    ``port``, ``db``, ``password`` and ``prefix`` (all optional)."""

    def __init__(self, config: str | Mapping[str, Any] | None, namespace: str) -> None:
        import redis  # the redis extra

        self.namespace = namespace
        options = dict(config) if isinstance(config, Mapping) else {}
        prefix = str(options.pop("prefix", DEFAULT_PREFIX))
        try:
            if isinstance(config, str) and config:
                self._client = redis.Redis.from_url(config)
            else:
                options.setdefault("host", "127.0.0.1")
                options.setdefault("port", 6379)
                self._client = redis.Redis(**options)
        except (TypeError, ValueError) as exc:
            raise StateError(f"redis state store: bad provider config {config!r}: {exc}") from exc
        if self._client.get_connection_kwargs().get("decode_responses"):
            # it would commit the state, then fail to read it back at the next start
            raise StateError(
                f"redis state store: bad provider config {config!r}: decode_responses must be "
                "off (the state is stored as bytes); remove it from the config"
            )
        self._errors: tuple[type[BaseException], ...] = (redis.RedisError,)
        self._where = f"redis state store {self._client!r}"
        self._key = f"{prefix}{namespace}"
        self._prepared = f"{self._key}:prepared"
        self._txids = f"{self._key}:txid"
        #: the transaction this object prepared: (txid, changes)
        self._mine: tuple[int, Mapping[bytes, bytes | None]] | None = None

    def _run(self, what: str, fn: Callable[[], _T]) -> _T:
        try:
            return fn()
        except self._errors as exc:
            raise StateError(f"{self._where}, namespace {self.namespace!r}: {what}: {exc}") from exc

    def load(self) -> dict[bytes, bytes]:
        def go() -> dict[bytes, bytes]:
            # redis types replies as bytes or str, for a client made with decode_responses,
            # which ``__init__`` refuses: replies are bytes here
            return cast("dict[bytes, bytes]", self._client.hgetall(self._key))

        return self._run("load", go)

    def prepare(self, txid: int, changes: Mapping[bytes, bytes | None]) -> None:
        def go() -> None:
            pipe = self._client.pipeline(transaction=True)
            pipe.delete(self._prepared)
            if changes:
                mapping: dict[Any, Any] = {k: (b"" if v is None else v) for k, v in changes.items()}
                pipe.hset(self._prepared, mapping=mapping)
            pipe.hset(self._txids, "prepared", txid)
            pipe.execute()

        self._mine = None
        self._run(f"prepare {txid}", go)
        self._mine = (txid, changes)

    def commit(self, txid: int) -> None:
        def go() -> None:
            if self._txid("prepared") != txid:
                return
            mine = self._mine
            deletes: list[Any]
            if mine is not None and mine[0] == txid:
                puts: dict[Any, Any] = {k: v for k, v in mine[1].items() if v is not None}
                deletes = [k for k, v in mine[1].items() if v is None]
            else:
                changes = self._client.hgetall(self._prepared)
                puts = {k: v for k, v in changes.items() if v}
                deletes = [k for k, v in changes.items() if not v]
            pipe = self._client.pipeline(transaction=True)
            if puts:
                pipe.hset(self._key, mapping=puts)
            if deletes:
                pipe.hdel(self._key, *deletes)
            pipe.delete(self._prepared)
            pipe.hdel(self._txids, "prepared")
            pipe.hset(self._txids, "committed", txid)
            pipe.execute()

        self._run(f"commit {txid}", go)
        self._mine = None

    def rollback(self) -> None:
        self._mine = None

        def go() -> None:
            pipe = self._client.pipeline(transaction=True)
            pipe.delete(self._prepared)
            pipe.hdel(self._txids, "prepared")
            pipe.execute()

        self._run("rollback", go)

    def _txid(self, field: str) -> int | None:
        value = self._client.hget(self._txids, field)
        return None if value is None else int(value)

    def prepared_txid(self) -> int | None:
        return self._run("read txid", lambda: self._txid("prepared"))

    def committed_txid(self) -> int | None:
        return self._run("read txid", lambda: self._txid("committed"))

    def close(self) -> None:
        self._client.close()
