"""``Config``: Storm's configuration keys, Storm's defaults, snake_case setters.

A plain ``dict`` with the same keys is accepted wherever a ``Config`` is. Keys starting
with ``topology.`` are checked: a mistyped one is an ``InvalidConfigError`` naming the
closest known key. Storm keys that promise a feature the engine lacks (event loggers,
metrics consumers) are refused unless they keep Storm's default, with what to use instead. Every other key is the user's own and is passed
through to components.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from typing import Any

from .errors import InvalidConfigError

__all__ = ["Config"]

TOPOLOGY_MESSAGE_TIMEOUT_SECS = "topology.message.timeout.secs"
TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS = "topology.enable.message.timeouts"
TOPOLOGY_MAX_SPOUT_PENDING = "topology.max.spout.pending"
TOPOLOGY_ACKER_EXECUTORS = "topology.acker.executors"
TOPOLOGY_TICK_TUPLE_FREQ_SECS = "topology.tick.tuple.freq.secs"
TOPOLOGY_PRODUCER_BATCH_SIZE = "topology.producer.batch.size"
TOPOLOGY_BATCH_FLUSH_INTERVAL_MILLIS = "topology.batch.flush.interval.millis"
TOPOLOGY_EXECUTOR_RECEIVE_BUFFER_SIZE = "topology.executor.receive.buffer.size"
TOPOLOGY_SLEEP_SPOUT_WAIT_STRATEGY_TIME_MS = "topology.sleep.spout.wait.strategy.time.ms"
TOPOLOGY_DEBUG = "topology.debug"
TOPOLOGY_DEBUG_SAMPLE_RATE = "topology.debug.sample.rate"
TOPOLOGY_BLOCKING_WARN_SECS = "topology.blocking.warn.secs"
TOPOLOGY_NAME = "topology.name"
TOPOLOGY_WORKERS = "topology.workers"
TOPOLOGY_MAX_TASK_PARALLELISM = "topology.max.task.parallelism"
TOPOLOGY_BOLT_MAX_INFLIGHT = "topology.bolt.max.inflight"
TOPOLOGY_SEED = "topology.seed"
TOPOLOGY_ERROR_HISTORY = "topology.error.history.size"
TOPOLOGY_MAX_ERROR_REPORT_PER_INTERVAL = "topology.max.error.report.per.interval"
TOPOLOGY_ERROR_THROTTLE_INTERVAL_SECS = "topology.error.throttle.interval.secs"
TOPOLOGY_PYTHON_GC_MANAGED = "topology.python.gc.managed"
TOPOLOGY_PYTHON_GC_INTERVAL_SECS = "topology.python.gc.interval.secs"
TOPOLOGY_STATE_PROVIDER = "topology.state.provider"
TOPOLOGY_STATE_PROVIDER_CONFIG = "topology.state.provider.config"
TOPOLOGY_STATE_CHECKPOINT_INTERVAL_MS = "topology.state.checkpoint.interval.ms"

#: A tree whose tuples wait in queues is kept from timing out for at most this many message
#: timeouts from its emit (the acker's protection against replay storms, ``_execution.acker``): a
#: tree that never completes is failed to its spout within one timeout more.
QUEUED_PROTECTION_TIMEOUTS = 2

#: ``topology.state.provider`` values -> the provider they choose (``engine.state``).
#: Storm's class names are accepted so configs exported from Storm load.
STATE_PROVIDER_ALIASES: dict[Any, str] = {
    None: "memory",
    "memory": "memory",
    "sqlite": "sqlite",
    "redis": "redis",
    "org.apache.storm.state.InMemoryKeyValueStateProvider": "memory",
    "org.apache.storm.redis.state.RedisKeyValueStateProvider": "redis",
}

#: Every key the engine reads, with its default. Where Storm's default would cost a queue
#: operation per tuple (producer batch size 1), the engine's default differs and says so.
DEFAULTS: dict[str, Any] = {
    TOPOLOGY_MESSAGE_TIMEOUT_SECS: 30,
    TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS: True,
    TOPOLOGY_MAX_SPOUT_PENDING: None,  # unlimited
    TOPOLOGY_ACKER_EXECUTORS: None,  # None = one acker, as Storm's one-worker default
    TOPOLOGY_TICK_TUPLE_FREQ_SECS: None,
    # Storm: 1. Batches are what make Python fast. A per-tuple spout's turn is this many
    # next_tuple calls, sealed as one batch: 1024 against 256 took the per-tuple word count
    # 3-8 % and per-tuple windows 25-45 % less CPU, batch components and latency unchanged.
    TOPOLOGY_PRODUCER_BATCH_SIZE: 1024,
    TOPOLOGY_BATCH_FLUSH_INTERVAL_MILLIS: 1,
    TOPOLOGY_EXECUTOR_RECEIVE_BUFFER_SIZE: 32768,  # tuples per executor
    TOPOLOGY_SLEEP_SPOUT_WAIT_STRATEGY_TIME_MS: 1,
    # Storm's: log the tuples each executor sends (logger engine.component.<id>, DEBUG),
    # "Emitting: ..." as Storm does; not Storm's: the share of them logged.
    TOPOLOGY_DEBUG: False,
    TOPOLOGY_DEBUG_SAMPLE_RATE: 1.0,
    # Not Storm's: warn when one call of user code holds the event loop longer than this.
    TOPOLOGY_BLOCKING_WARN_SECS: 0.25,
    TOPOLOGY_NAME: None,
    TOPOLOGY_WORKERS: 1,
    TOPOLOGY_MAX_TASK_PARALLELISM: None,
    # Not Storm's: tuples an async bolt task may execute at once.
    TOPOLOGY_BOLT_MAX_INFLIGHT: 64,
    # Not Storm's: the seed of every random choice (ids, shuffles); None = fresh entropy.
    TOPOLOGY_SEED: None,
    # Not Storm's: errors kept per task in the stats, with their tracebacks (all are counted).
    TOPOLOGY_ERROR_HISTORY: 10,
    # Storm's: per task, at most this many errors logged per interval; the rest are counted,
    # and summed up in one line when the interval ends.
    TOPOLOGY_MAX_ERROR_REPORT_PER_INTERVAL: 5,
    TOPOLOGY_ERROR_THROTTLE_INTERVAL_SECS: 10,
    # Not Storm's: while a topology runs, the engine freezes the objects that existed at
    # start and runs the cyclic garbage collector itself every interval, instead of letting
    # every 700 new tuples trigger a collection (a third of the time at full speed).
    TOPOLOGY_PYTHON_GC_MANAGED: True,
    TOPOLOGY_PYTHON_GC_INTERVAL_SECS: 1.0,
    # Stateful bolts (engine.state): where their state lives and how often it is checkpointed.
    TOPOLOGY_STATE_PROVIDER: None,  # None = "memory", Storm's in-memory default
    TOPOLOGY_STATE_PROVIDER_CONFIG: None,
    TOPOLOGY_STATE_CHECKPOINT_INTERVAL_MS: 1000,
}

#: Storm keys that mean nothing in one process; accepted and ignored so Storm configs load.
IGNORED_STORM_KEYS = frozenset(
    {
        "topology.worker.childopts",
        "topology.worker.max.heap.size.mb",
        "topology.kryo.register",
        "topology.kryo.factory",
        "topology.skip.missing.kryo.registrations",
        "topology.fall.back.on.java.serialization",
        "topology.testing.always.try.serialize",
        "topology.stats.sample.rate",
        "topology.backpressure.enable",
        "topology.transfer.buffer.size",
        "topology.transfer.batch.size",
        "topology.spout.wait.strategy",
        "topology.bolt.wait.strategy",
        "topology.disable.loadaware.messaging",
        "topology.priority",
        "topology.component.resources.onheap.memory.mb",
        "topology.component.cpu.pcore.percent",
        "topology.builtin.metrics.bucket.size.secs",
        "topology.scheduler.strategy",
        "topology.ras.acker.executors.per.worker",
        "topology.localityaware.higher.bound",
        "topology.localityaware.lower.bound",
        "topology.shellbolt.max.pending",
        "topology.multilang.serializer",
        "topology.subprocess.timeout.secs",
        "topology.isolate.machines",
        "topology.users",
        "topology.groups",
        "topology.submitter.user",
    }
)

_TRACE = "run_topology(..., trace=True) and read running.runtime.trace.events"

#: Storm keys that promise a feature the engine does not have: accepted only with Storm's
#: default (or None), which promises nothing; any other value is refused with what to use
#: instead, never silently ignored. key -> (accepted values, why and what to do instead,
#: a template of ``value``).
REFUSED_STORM_KEYS: dict[str, tuple[tuple[Any, ...], str]] = {
    "topology.eventlogger.executors": (
        (None, 0),
        "must be 0 or None: the engine has no event loggers. Run with "
        + _TRACE
        + " for every tuple's path, got {value!r}",
    ),
    "topology.metrics.consumer.register": (
        (None, [], ()),
        "is not supported: the engine has no metrics consumers. Read metrics with "
        "running.info() (LocalCluster.get_topology_info) or serve them with "
        "engine.prometheus.serve_prometheus(running, port); remove the key, got {value!r}",
    ),
}

#: Keys a component may override through ``add_configuration`` / ``component_configuration``
#: (Storm's allow-list plus the engine's per-executor knobs).
COMPONENT_KEYS = frozenset(
    {
        TOPOLOGY_DEBUG,
        TOPOLOGY_DEBUG_SAMPLE_RATE,
        TOPOLOGY_BLOCKING_WARN_SECS,
        TOPOLOGY_MAX_SPOUT_PENDING,
        TOPOLOGY_MAX_TASK_PARALLELISM,
        TOPOLOGY_TICK_TUPLE_FREQ_SECS,
        TOPOLOGY_PRODUCER_BATCH_SIZE,
        TOPOLOGY_EXECUTOR_RECEIVE_BUFFER_SIZE,
        TOPOLOGY_SLEEP_SPOUT_WAIT_STRATEGY_TIME_MS,
        TOPOLOGY_BOLT_MAX_INFLIGHT,
        "topology.kryo.register",
    }
)

_POSITIVE_INT_KEYS = {
    TOPOLOGY_PRODUCER_BATCH_SIZE,
    TOPOLOGY_EXECUTOR_RECEIVE_BUFFER_SIZE,
    TOPOLOGY_BOLT_MAX_INFLIGHT,
    TOPOLOGY_WORKERS,
    TOPOLOGY_ERROR_HISTORY,
    TOPOLOGY_MAX_ERROR_REPORT_PER_INTERVAL,
}
_OPTIONAL_POSITIVE_INT_KEYS = {TOPOLOGY_MAX_SPOUT_PENDING, TOPOLOGY_MAX_TASK_PARALLELISM}
_POSITIVE_NUMBER_KEYS = {
    TOPOLOGY_MESSAGE_TIMEOUT_SECS,
    TOPOLOGY_PYTHON_GC_INTERVAL_SECS,
    TOPOLOGY_ERROR_THROTTLE_INTERVAL_SECS,
}
_OPTIONAL_POSITIVE_NUMBER_KEYS = {TOPOLOGY_TICK_TUPLE_FREQ_SECS}
_NON_NEGATIVE_NUMBER_KEYS = {
    TOPOLOGY_BATCH_FLUSH_INTERVAL_MILLIS,
    TOPOLOGY_SLEEP_SPOUT_WAIT_STRATEGY_TIME_MS,
}
#: keys whose value may be a float, and must then be finite
_NUMBER_KEYS = {
    *_POSITIVE_NUMBER_KEYS,
    *_OPTIONAL_POSITIVE_NUMBER_KEYS,
    *_NON_NEGATIVE_NUMBER_KEYS,
    TOPOLOGY_BLOCKING_WARN_SECS,
    TOPOLOGY_STATE_CHECKPOINT_INTERVAL_MS,
}
_BOOL_KEYS = {TOPOLOGY_DEBUG, TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS, TOPOLOGY_PYTHON_GC_MANAGED}


class Config(dict[str, Any]):
    """Topology configuration: Storm's keys with Storm's defaults, and setters for them.

    A ``dict`` (a plain one works as well), so configs exported from Storm load as they are
    and a component reads its own keys from the ``conf`` it gets in ``open``/``prepare``.
    The setters only spell the common keys; every value is checked when the topology is
    submitted, with the key named.

    >>> from engine import Config
    >>> conf = Config()
    >>> conf.set_message_timeout_secs(10)
    >>> conf.set_max_spout_pending(1000)
    >>> conf["my.own.key"] = "passed through"
    >>> conf
    {'topology.message.timeout.secs': 10, 'topology.max.spout.pending': 1000, 'my.own.key': 'passed through'}
    """

    def set_debug(self, debug: bool) -> None:
        """Log the tuples every executor sends (``topology.debug``; the share of them with
        ``topology.debug.sample.rate``) to ``engine.component.<id>`` at DEBUG level."""
        _check_value(TOPOLOGY_DEBUG, debug, "")
        self[TOPOLOGY_DEBUG] = debug

    def set_message_timeout_secs(self, secs: float) -> None:
        """How long a spout's tuple tree may take (default 30 s) before it is failed to the
        spout, which may replay it. Time spent waiting in queues counts only within a
        bound, so a backlog does not turn into a storm of replays; a bolt that needs longer
        for one tuple calls ``reset_timeout``."""
        self[TOPOLOGY_MESSAGE_TIMEOUT_SECS] = secs

    def set_enable_message_timeouts(self, enable: bool) -> None:
        """``False``: trees never time out, only an explicit ``fail`` fails them. For tests
        and for topologies whose bolts hold tuples for unbounded times; a lost tuple is
        then pending forever."""
        self[TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS] = enable

    def set_max_spout_pending(self, n: int | None) -> None:
        """At most ``n`` messages of each spout task in flight (emitted with a message id,
        neither acked nor failed yet); ``next_tuple`` is not called while it is reached.
        It bounds memory and latency, and the work a failure can send back for replay.
        ``None`` (the default): no bound but backpressure."""
        self[TOPOLOGY_MAX_SPOUT_PENDING] = n

    def set_num_ackers(self, n: int) -> None:
        """Acker executors; ``0`` turns acking off: every tuple counts as acked when its
        spout emits it, and nothing is ever replayed (at-most-once, and faster)."""
        self[TOPOLOGY_ACKER_EXECUTORS] = n

    def set_num_workers(self, n: int) -> None:
        """Storm's worker processes. A topology here runs in one process, so the value is
        checked (a positive int) and kept for components that read it, nothing more."""
        self[TOPOLOGY_WORKERS] = n

    def set_max_task_parallelism(self, n: int) -> None:
        """Cap every component's tasks at ``n``, whatever its declaration asks: to run a
        topology written for a cluster on a small machine, or in a test."""
        self[TOPOLOGY_MAX_TASK_PARALLELISM] = n

    def set_tick_tuple_freq_secs(self, secs: float | None) -> None:
        """Send every bolt task a tick tuple (``is_tick_tuple``) each ``secs`` of the
        topology's clock: the way a bolt flushes or expires on time without a thread of
        its own. Usually set per bolt, in its ``component_configuration``."""
        self[TOPOLOGY_TICK_TUPLE_FREQ_SECS] = secs

    def set_producer_batch_size(self, n: int) -> None:
        """Per-tuple emits a producer gathers into one batch before it hands them on (1024;
        Storm's 1 costs a queue operation per tuple). A batch is flushed sooner when the
        producer idles or the flush interval ends, so a lone tuple never waits for more."""
        self[TOPOLOGY_PRODUCER_BATCH_SIZE] = n

    def set_batch_flush_interval_millis(self, millis: float) -> None:
        """The longest a partly filled batch waits before it is handed on (1 ms): the bound
        on the latency batching adds under a steady trickle of tuples."""
        self[TOPOLOGY_BATCH_FLUSH_INTERVAL_MILLIS] = millis

    def set_executor_receive_buffer_size(self, n: int) -> None:
        """The tuples an executor's inbox holds (32768). A full inbox makes its producers
        wait: backpressure, which reaches the spouts, that are then not asked for more."""
        self[TOPOLOGY_EXECUTOR_RECEIVE_BUFFER_SIZE] = n

    def set_bolt_max_inflight(self, n: int) -> None:
        """Calls of an ``async`` bolt's ``execute`` (or batches of an async batch bolt) that
        one task runs at once (64): how a bolt waiting on I/O keeps many requests in
        flight. Storm runs one at a time."""
        self[TOPOLOGY_BOLT_MAX_INFLIGHT] = n

    def set_seed(self, seed: int | None) -> None:
        """The seed of every random choice the engine makes (tuple ids, shuffles): a run is
        reproducible, under ``engine.testing.simulate`` to the tuple. ``None``: a fresh
        one, which the run's conf then holds so that it can be repeated."""
        self[TOPOLOGY_SEED] = seed


def _suggest(key: str) -> str:
    # Compare what follows "topology.": the shared prefix alone must not make keys "close".
    prefix = "topology."
    known = {
        k[len(prefix) :]: k
        for k in sorted(set(DEFAULTS) | IGNORED_STORM_KEYS | set(REFUSED_STORM_KEYS))
    }
    close = difflib.get_close_matches(key[len(prefix) :], list(known), n=1, cutoff=0.6)
    return f"; did you mean {known[close[0]]!r}?" if close else ""


def _check_value(key: str, value: Any, where: str) -> None:
    def bad(expected: str) -> InvalidConfigError:
        return InvalidConfigError(f"{where}{key!r} must be {expected}, got {value!r}")

    refused = REFUSED_STORM_KEYS.get(key)
    if refused is not None:
        accepted, why = refused
        if not any(value is ok or (type(value) is type(ok) and value == ok) for ok in accepted):
            raise InvalidConfigError(f"{where}{key!r} " + why.format(value=value))
    is_int = isinstance(value, int) and not isinstance(value, bool)
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if key in _NUMBER_KEYS and isinstance(value, float) and math.isinf(value):
        # it would pass every "> 0" below, then fail the start converting to nanoseconds
        raise bad("finite")
    if key in _BOOL_KEYS and not isinstance(value, bool):
        raise bad("True or False")  # bool("false") is True: a string would mean the opposite
    if key in _POSITIVE_INT_KEYS and not (is_int and value > 0):
        raise bad("a positive int")
    if key in _OPTIONAL_POSITIVE_INT_KEYS and value is not None and not (is_int and value > 0):
        raise bad("a positive int or None")
    if key in _POSITIVE_NUMBER_KEYS and not (is_number and value > 0):
        raise bad("a positive number")
    if (
        key in _OPTIONAL_POSITIVE_NUMBER_KEYS
        and value is not None
        and not (is_number and value > 0)
    ):
        raise bad("a positive number or None")
    if key in _NON_NEGATIVE_NUMBER_KEYS and not (is_number and value >= 0):
        raise bad("a number >= 0")
    if key == TOPOLOGY_ACKER_EXECUTORS and value is not None and not (is_int and value >= 0):
        raise bad("an int >= 0 or None")
    if key == TOPOLOGY_DEBUG_SAMPLE_RATE and not (is_number and 0 < value <= 1):
        raise bad("a number in (0, 1]")
    if key == TOPOLOGY_BLOCKING_WARN_SECS and not (is_number and value > 0):
        raise bad("a positive number of seconds")
    if key == TOPOLOGY_SEED and value is not None and not is_int:
        raise bad("an int or None")
    if key == TOPOLOGY_STATE_PROVIDER and (
        not isinstance(value, (str, type(None))) or value not in STATE_PROVIDER_ALIASES
    ):
        raise bad(
            "one of 'memory', 'redis', 'sqlite' (or Storm's "
            "'org.apache.storm.state.InMemoryKeyValueStateProvider' / "
            "'org.apache.storm.redis.state.RedisKeyValueStateProvider')"
        )
    if key == TOPOLOGY_STATE_PROVIDER_CONFIG and not isinstance(value, (str, Mapping, type(None))):
        raise bad("a string (a path, a URL or JSON), a mapping or None")
    if (
        key == TOPOLOGY_STATE_CHECKPOINT_INTERVAL_MS
        and value is not None
        and not (is_number and value > 0)
    ):
        raise bad("a positive number of milliseconds or None")


def _check_state_provider(conf: Mapping[str, Any], where: str) -> None:
    """The SQLite provider needs its file: say so on submit, not at the first checkpoint."""
    provider = conf.get(TOPOLOGY_STATE_PROVIDER)
    if not isinstance(provider, (str, type(None))) or STATE_PROVIDER_ALIASES.get(provider) != (
        "sqlite"
    ):
        return
    config = conf.get(TOPOLOGY_STATE_PROVIDER_CONFIG)
    path = config.get("path") if isinstance(config, Mapping) else config
    if not isinstance(path, str) or not path:
        raise InvalidConfigError(
            f"{where}'topology.state.provider' = 'sqlite' needs the database file: set "
            f"'topology.state.provider.config' to its path (or {{'path': ...}}), got {config!r}"
        )


def check_config(conf: Mapping[str, Any], where: str = "") -> None:
    """Raise ``InvalidConfigError`` for a mistyped ``topology.*`` key or a bad value."""
    if not isinstance(conf, Mapping):
        raise InvalidConfigError(
            f"{where}a config must be a mapping of keys to values (a dict or engine.Config), "
            f"got {type(conf).__name__}"
        )
    for key, value in conf.items():
        if not isinstance(key, str):
            raise InvalidConfigError(f"{where}config keys must be strings, got {key!r}")
        if key.startswith("topology."):
            if (
                key not in DEFAULTS
                and key not in IGNORED_STORM_KEYS
                and key not in REFUSED_STORM_KEYS
            ):
                raise InvalidConfigError(f"{where}unknown config key {key!r}{_suggest(key)}")
            _check_value(key, value, where)
    _check_state_provider(conf, where)


def check_component_config(component_id: str, conf: Mapping[str, Any]) -> None:
    where = f"component {component_id!r}: "
    check_config(conf, where)
    for key in conf:
        if key.startswith("topology.") and key not in COMPONENT_KEYS:
            raise InvalidConfigError(
                f"{where}{key!r} cannot be set per component; set it in the topology's "
                f"config instead (per-component keys: {sorted(COMPONENT_KEYS)})"
            )


def merged_config(base: Mapping[str, Any] | None) -> dict[str, Any]:
    """Storm's defaults overlaid with ``base`` (validated)."""
    conf = dict(DEFAULTS)
    if base:
        check_config(base)
        conf.update(base)
    return conf
