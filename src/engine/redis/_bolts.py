"""storm-redis's bolts on the official ``redis`` client's asyncio API.

Each bolt is a ``BatchBolt`` with an ``async execute_batch``: one pipeline per batch (a
batch is whatever arrived together: many rows under load, one when idle), up to
``topology.bolt.max.inflight`` batches in flight per task (the executor runs that many calls
at once, so a task waits for Redis's round trips side by side, not one after another). A
batch's rows are acked only after Redis answered every command of its pipeline, whatever
the other batches in flight do; if Redis fails or is unreachable the
whole batch is failed (the spout replays it: at-least-once, so a counter may count a replayed
row twice, never lose one) and the error is reported. A command Redis refuses (a key holding
another type, a value that is not an integer) fails only the rows it was for, as Storm fails
only the tuple whose command failed: the other commands took effect. The client reconnects
by itself, so a topology recovers when Redis is back.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from .._model.batch_component import BatchBolt
from .._model.errors import InvalidComponentError, InvalidConfigError
from ._mapper import RedisDataType, RedisFilterMapper, RedisLookupMapper, RedisStoreMapper

__all__ = ["RedisConfig", "RedisFilterBolt", "RedisLookupBolt", "RedisStoreBolt"]


@dataclass(frozen=True)
class RedisConfig:
    """Where Redis is (storm-redis's ``JedisPoolConfig``): host, port, db and password, or a
    ``url`` that says them all (not both); and how long the client waits and retries before
    a batch fails.

    - ``socket_timeout_secs``: a command without an answer for this long fails.
    - ``socket_connect_timeout_secs``: a connection not made in this long fails.
    - ``retries``: how many times the client itself retries a command that failed for a
      lost or refused connection or a timeout, ``retry_backoff_secs`` apart, before the
      batch fails. The client's own default (10 retries, backing off up to 10 s) spends
      seconds per batch during an outage, so the outage is reported late; here one retry
      (which survives a Redis restart) is enough: a failed batch is replayed by its spout.

    Every error names the address (``host:port``; never the URL, which may hold a
    password) and the client's reason.
    """

    host: str = "127.0.0.1"
    port: int = 6379
    db: int = 0
    password: str | None = None
    url: str | None = None
    socket_timeout_secs: float | None = 5.0
    socket_connect_timeout_secs: float | None = 2.0
    retries: int = 1
    retry_backoff_secs: float = 0.1

    def __post_init__(self) -> None:
        if self.url is not None:
            # the client would take everything from the url: refused rather than ignored
            given = [
                name
                for name, default in (("host", "127.0.0.1"), ("port", 6379), ("db", 0))
                if getattr(self, name) != default
            ] + (["password"] if self.password is not None else [])
            if given:
                raise InvalidConfigError(
                    f"RedisConfig: url and {' and '.join(given)} are given together, and the "
                    f"url says where to connect; put {' and '.join(given)} in the url "
                    f"(redis://[:password@]host[:port][/db]) or leave url out"
                )
        for name in ("socket_timeout_secs", "socket_connect_timeout_secs"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0
            ):
                raise InvalidConfigError(
                    f"RedisConfig.{name} must be a number of seconds > 0 or None (no limit), "
                    f"got {value!r}"
                )
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) or self.retries < 0:
            raise InvalidConfigError(
                f"RedisConfig.retries must be an int >= 0, got {self.retries!r}"
            )
        backoff = self.retry_backoff_secs
        if isinstance(backoff, bool) or not isinstance(backoff, (int, float)) or not backoff >= 0:
            raise InvalidConfigError(
                f"RedisConfig.retry_backoff_secs must be a number of seconds >= 0, got {backoff!r}"
            )

    @property
    def address(self) -> str:
        """``host:port`` (or the socket path) of the server, for messages."""
        if not self.url:
            return f"{self.host}:{self.port}"
        parts = urlsplit(self.url)
        if parts.scheme == "unix":
            return parts.path
        return f"{parts.hostname or 'localhost'}:{parts.port or 6379}"

    def client(self) -> Any:
        """A new ``redis.asyncio.Redis`` with these timeouts and retries. Each bolt task
        makes its own in ``prepare``: a client holds connections, which do not pickle."""
        from redis.asyncio import Redis
        from redis.asyncio.retry import Retry
        from redis.backoff import ConstantBackoff

        options: dict[str, Any] = {
            "socket_timeout": self.socket_timeout_secs,
            "socket_connect_timeout": self.socket_connect_timeout_secs,
            "retry": Retry(ConstantBackoff(self.retry_backoff_secs), self.retries),
        }
        if self.url:
            return Redis.from_url(self.url, **options)
        return Redis(host=self.host, port=self.port, db=self.db, password=self.password, **options)


def _pylist(column: Any) -> list[Any]:
    values: list[Any]
    if hasattr(column, "to_pylist"):  # Arrow
        values = column.to_pylist()
    elif hasattr(column, "tolist"):  # numpy
        values = column.tolist()
    else:
        values = list(column)
    return values


class _RedisBolt(BatchBolt):
    def __init__(self, config: RedisConfig, mapper: Any, kind: type) -> None:
        if not isinstance(config, RedisConfig):
            raise InvalidComponentError(
                f"{type(self).__name__}: config must be a RedisConfig, got {config!r}"
            )
        if not isinstance(mapper, kind):
            raise InvalidComponentError(
                f"{type(self).__name__}: mapper must be a {kind.__name__}, got {mapper!r}"
            )
        self.config = config
        self.mapper: Any = mapper

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        import redis

        self.collector = collector
        self._where = f"{type(self).__name__} {context.get_this_component_id()!r}"
        self._client = self.config.client()
        self._errors: tuple[type[BaseException], ...] = (redis.RedisError, OSError)
        self.written = 0  # rows Redis confirmed (tests and benchmarks read it)

    def cleanup(self) -> Any:
        return self._client.aclose()

    def _column(self, batch: Any, name: str | None, get: Any) -> list[Any]:
        if self.mapper.by_fields:
            return _pylist(batch.column(name))
        return [get(t) for t in batch.tuples()]

    def _keys(self, batch: Any) -> list[Any]:
        return self._column(batch, self.mapper.key_field, self.mapper.get_key_from_tuple)

    def _values(self, batch: Any) -> list[Any]:
        return self._column(batch, self.mapper.value_field, self.mapper.get_value_from_tuple)

    async def _run(
        self, batch: Any, pipe: Any, served: Sequence[Sequence[int]]
    ) -> tuple[list[Any], list[int]] | None:
        """Run ``pipe`` (``served[i]``: the rows of ``batch`` its command ``i`` is for).
        Returns Redis's replies and the rows whose command Redis refused (those rows are
        failed and the error reported: the others' commands took effect, so failing them
        too would apply them again on replay); None when the whole pipeline failed (the
        whole batch is failed)."""
        try:
            replies: list[Any] = await pipe.execute(raise_on_error=False)
        except self._errors as exc:
            # str(), not repr(): redis's repr is only the kind ("network:ConnectionError").
            self.collector.report_error(
                f"{self._where}: Redis at {self.config.address} failed "
                f"({type(exc).__name__}: {exc}); {len(batch)} rows failed for replay"
            )
            self.collector.fail(batch)
            return None
        errors = [e for e in replies if isinstance(e, Exception)]
        if not errors:
            return replies, []
        refused = sorted(
            {
                i
                for r, rows in zip(replies, served, strict=True)
                if isinstance(r, Exception)
                for i in rows
            }
        )
        self.collector.report_error(
            f"{self._where}: Redis at {self.config.address} refused {len(errors)} command(s), "
            f"the first: {type(errors[0]).__name__}: {errors[0]}; {len(refused)} of "
            f"{len(batch)} rows failed for replay"
        )
        self.collector.fail(batch, refused)
        return replies, refused

    def _ack_all_but(self, batch: Any, refused: list[int]) -> int:
        """Ack the rows of ``batch`` not in ``refused``; returns how many."""
        if not refused:
            self.collector.ack(batch)
            return len(batch)
        gone = set(refused)
        ok = [i for i in range(len(batch)) if i not in gone]
        if ok:
            self.collector.ack(batch, ok)
        return len(ok)


class RedisStoreBolt(_RedisBolt):
    """Writes every tuple to Redis as its mapper says; acks once Redis confirmed the write.

    >>> from engine.redis import RedisConfig, RedisDataType, RedisStoreBolt, RedisStoreMapper
    >>> bolt = RedisStoreBolt(RedisConfig(port=6379), RedisStoreMapper(
    ...     RedisDataType.HASH_COUNTER, "page", "views", additional_key="views"))
    >>> # builder.set_bolt("store", bolt).fields_grouping("count", Fields("page"))
    """

    def __init__(self, config: RedisConfig, mapper: RedisStoreMapper) -> None:
        super().__init__(config, mapper, RedisStoreMapper)

    async def execute_batch(self, batch: Any) -> None:
        m: RedisStoreMapper = self.mapper
        keys, values = self._keys(batch), self._values(batch)
        pipe = self._client.pipeline(transaction=False)
        ttl = m.ttl_secs
        t = m.data_type
        ak = m.additional_key
        every = range(len(batch))
        served: list[Sequence[int]] = []  # per command, the rows it writes
        if t is RedisDataType.STRING:
            for i, (k, v) in enumerate(zip(keys, values, strict=True)):
                pipe.set(k, v, ex=ttl)
                served.append((i,))
        elif t is RedisDataType.HASH:
            pipe.hset(ak, mapping=dict(zip(keys, values, strict=True)))
            served.append(every)
        elif t is RedisDataType.SORTED_SET:
            pipe.zadd(ak, dict(zip(keys, values, strict=True)))
            served.append(every)
        elif t in (RedisDataType.HASH_COUNTER, RedisDataType.COUNTER):
            sums: dict[Any, int] = defaultdict(int)
            rows: dict[Any, list[int]] = defaultdict(list)
            for i, (k, v) in enumerate(zip(keys, values, strict=True)):
                sums[k] += v
                rows[k].append(i)
            for k, v in sums.items():
                if t is RedisDataType.HASH_COUNTER:
                    pipe.hincrby(ak, k, v)
                    served.append(rows[k])
                    continue
                pipe.incrby(k, v)
                served.append(rows[k])
                if ttl:
                    pipe.expire(k, ttl)
                    served.append(rows[k])
        else:
            add = pipe.sadd if t is RedisDataType.SET else pipe.rpush
            for i, (k, v) in enumerate(zip(keys, values, strict=True)):
                add(k, v)
                served.append((i,))
                if ttl:
                    pipe.expire(k, ttl)
                    served.append((i,))
        if ttl and ak:
            pipe.expire(ak, ttl)
            served.append(every)
        done = await self._run(batch, pipe, served)
        if done is not None:
            self.written += self._ack_all_but(batch, done[1])


def _read(pipe: Any, m: Any, key: Any) -> None:
    t = m.data_type
    if t in (RedisDataType.STRING, RedisDataType.COUNTER):
        pipe.get(key)
    elif t in (RedisDataType.HASH, RedisDataType.HASH_COUNTER):
        pipe.hget(m.additional_key, key)
    elif t is RedisDataType.SORTED_SET:
        pipe.zscore(m.additional_key, key)
    elif t is RedisDataType.SET:
        pipe.smembers(key)
    else:
        pipe.lrange(key, 0, -1)


class RedisLookupBolt(_RedisBolt):
    """Looks each tuple's key up and emits ``[*pass_fields, value]`` anchored to it (the
    value is None when the key is missing; bytes as Redis returns them)."""

    def __init__(
        self, config: RedisConfig, mapper: RedisLookupMapper, pass_fields: Sequence[str] = ()
    ) -> None:
        super().__init__(config, mapper, RedisLookupMapper)
        self.pass_fields = tuple(pass_fields) or (mapper.key_field,)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare([*self.pass_fields, self.mapper.output_field])

    async def execute_batch(self, batch: Any) -> None:
        pipe = self._client.pipeline(transaction=False)
        for key in self._keys(batch):
            _read(pipe, self.mapper, key)
        done = await self._run(batch, pipe, [(i,) for i in range(len(batch))])
        if done is None:
            return
        found, refused = done
        columns = [_pylist(batch.column(f)) for f in self.pass_fields] + [found]
        if not refused:
            self.collector.emit_batch(columns, anchor_batch=batch)
        else:
            gone = set(refused)
            rows = [i for i in range(len(batch)) if i not in gone]
            if rows:
                columns = [[c[i] for i in rows] for c in columns]
                self.collector.emit_batch(columns, anchors=rows, anchor_batch=batch)
        self._ack_all_but(batch, refused)


class RedisFilterBolt(_RedisBolt):
    """Passes on (anchored) only the tuples whose key exists in Redis; ``fields`` are the
    input fields it emits."""

    def __init__(
        self, config: RedisConfig, mapper: RedisFilterMapper, fields: Sequence[str]
    ) -> None:
        super().__init__(config, mapper, RedisFilterMapper)
        if not fields:
            raise InvalidComponentError("RedisFilterBolt: fields (the fields to emit) are required")
        self.fields = tuple(fields)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(list(self.fields))

    async def execute_batch(self, batch: Any) -> None:
        m: RedisFilterMapper = self.mapper
        keys = self._keys(batch)
        pipe = self._client.pipeline(transaction=False)
        t = m.data_type
        if t is RedisDataType.SET:
            for k, v in zip(keys, self._values(batch), strict=True):
                pipe.sismember(k, v)
        elif t in (RedisDataType.HASH, RedisDataType.HASH_COUNTER):
            for k in keys:
                pipe.hexists(m.additional_key, k)
        elif t is RedisDataType.SORTED_SET:
            for k in keys:
                pipe.zscore(m.additional_key, k)
        else:
            for k in keys:
                pipe.exists(k)
        done = await self._run(batch, pipe, [(i,) for i in range(len(batch))])
        if done is None:
            return
        found, refused = done
        if refused:
            gone = set(refused)
            found = [None if i in gone else hit for i, hit in enumerate(found)]
        if t is RedisDataType.SORTED_SET:  # ZSCORE answers the score, which may be 0
            rows = [i for i, score in enumerate(found) if score is not None]
        else:
            rows = [i for i, hit in enumerate(found) if hit]
        if rows:
            columns = [
                [c[i] for i in rows] for c in (_pylist(batch.column(f)) for f in self.fields)
            ]
            self.collector.emit_batch(columns, anchors=rows, anchor_batch=batch)
        self._ack_all_but(batch, refused)
