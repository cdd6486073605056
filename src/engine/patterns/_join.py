"""``JoinBolt``: join two or more streams on a key, with a pending cache bounded in time.

Storm's ``JoinBolt`` API (``JoinBolt(source, field).join(source, field, prior).select(...)``)
as a symmetric hash join over a time-bounded cache (storm-starter's ``SingleJoinBolt`` keeps
one tuple per side; this keeps each tuple for ``with_timeout``): a tuple arriving joins every
combination of the tuples of the other sources waiting with the same key, each output
anchored to every tuple it joins, then waits itself. When its time is up, a tuple that
joined at least once is acked; one that never joined fails, so its spout replays it: a join
is never dropped silently.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from .._model.component import Bolt, OutputFieldsDeclarer
from .._model.errors import InvalidComponentError, InvalidConfigError, InvalidGroupingError
from .._model.grouping import GroupingKind
from .._model.tuple import Tuple, is_tick_tuple
from ._rotating import TimeCacheMap

__all__ = ["JoinBolt"]

COMPONENT = "component"
STREAM = "stream"
#: the pending cache's buckets: it rotates every with_timeout / 4, on a tick every as often
_BUCKETS = 5
_TICK = "topology.tick.tuple.freq.secs"


class JoinBolt(Bolt):
    """Joins the tuples of several sources that share a key.

    >>> from engine.patterns import JoinBolt
    >>> join = (JoinBolt("purchases", "user")            # the first source and its key field
    ...         .join("ads", "user_id", "purchases")     # ads.user_id == purchases.user
    ...         .select("user, product, ads:ad")         # output fields; source:field if ambiguous
    ...         .with_timeout(10))                       # a key waits at most ~10 s
    >>> # builder.set_bolt("join", join, 4) \\
    >>> #     .fields_grouping("purchases", Fields("user")) \\
    >>> #     .fields_grouping("ads", Fields("user_id"))

    Sources are component ids (``selector="stream"``: stream ids). Every combination of
    tuples (one per source, same key) that arrive within the timeout of each other is
    emitted once. Tuples are held (not acked) for the timeout, so it must stay below the
    message timeout (refused otherwise). Each input must be fields-grouped on its key field
    when the bolt has more than one task (refused at start otherwise). Output: the selected
    field names.
    """

    def __init__(self, source: str, field: str, *, selector: str = COMPONENT) -> None:
        if selector not in (COMPONENT, STREAM):
            raise InvalidComponentError(
                f"JoinBolt: selector must be 'component' or 'stream', got {selector!r}"
            )
        self.selector = selector
        self.keys: dict[str, str] = {}
        self._add(source, field)
        self.selected: list[tuple[str | None, str]] = []
        self.timeout_secs: float | None = None

    def _add(self, source: str, field: str) -> None:
        for what, v in (("source", source), ("field", field)):
            if not isinstance(v, str) or not v:
                raise InvalidComponentError(
                    f"JoinBolt: {what} must be a non-empty string, got {v!r}"
                )
        if source in self.keys:
            raise InvalidComponentError(f"JoinBolt: source {source!r} is joined twice")
        self.keys[source] = field

    def join(self, source: str, field: str, prior: str) -> JoinBolt:
        """Inner join ``source`` on ``field`` with ``prior`` (a source already named)."""
        if prior not in self.keys:
            raise InvalidComponentError(
                f"JoinBolt: join({source!r}, {field!r}, {prior!r}): {prior!r} is not joined yet "
                f"(sources so far: {list(self.keys)})"
            )
        self._add(source, field)
        return self

    def select(self, fields: str | Sequence[str]) -> JoinBolt:
        """The output fields: ``"a, b, src:c"`` or a list; ``src:`` picks one source's."""
        names = [f.strip() for f in fields.split(",")] if isinstance(fields, str) else list(fields)
        selected: list[tuple[str | None, str]] = []
        for name in names:
            src, _, field = name.rpartition(":")
            if not field:
                raise InvalidComponentError(f"JoinBolt: select has an empty field in {fields!r}")
            selected.append((src or None, field))
        outs = [f for _, f in selected]
        dup = sorted({f for f in outs if outs.count(f) > 1})
        if dup:
            raise InvalidComponentError(
                f"JoinBolt: select names the output field {dup[0]!r} twice; output fields must differ"
            )
        self.selected = selected
        return self

    def with_timeout(self, seconds: float) -> JoinBolt:
        """How long each tuple waits for tuples of the other sources (between ``seconds``
        and 1.5 x ``seconds``)."""
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0:
            raise InvalidComponentError(
                f"JoinBolt: with_timeout needs seconds > 0, got {seconds!r}"
            )
        self.timeout_secs = float(seconds)
        return self

    # --- declaration -------------------------------------------------------------------
    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare([f for _, f in self.selected])

    def component_configuration(self) -> Mapping[str, Any] | None:
        if self.timeout_secs is None:
            return None
        return {_TICK: self.timeout_secs / (_BUCKETS - 1)}

    def validate_topology_conf(self, component_id: str, conf: Mapping[str, Any]) -> None:
        """``create_topology`` calls it with the bolt's effective config: a join of at least
        two sources that selects its output, with a timeout whose longest wait is below the
        message timeout, or held tuples would time out first. A tuple expires on the first
        tick after the cache's rotation that drops it: ``1.25 x with_timeout`` after its
        arrival at most, plus up to one tick period (``with_timeout / 4`` unless the bolt's
        ``topology.tick.tuple.freq.secs`` is set): ``1.5 x with_timeout`` in all."""
        where = f"join bolt {component_id!r}"
        if len(self.keys) < 2:
            raise InvalidComponentError(
                f"{where} joins one source; add .join(source, field, prior)"
            )
        if not self.selected:
            raise InvalidComponentError(f"{where} selects no fields; add .select('field, ...')")
        if self.timeout_secs is None:
            raise InvalidComponentError(
                f"{where} has no pending timeout; add .with_timeout(seconds) (below the "
                f"topology's message timeout)"
            )
        own_tick = self.timeout_secs / (_BUCKETS - 1)
        tick = conf.get(_TICK, own_tick)
        if not tick:
            raise InvalidConfigError(
                f"{where}: {_TICK} is unset, and the join expires its tuples on tick tuples; "
                f"leave it to the bolt (with_timeout / 4) or set it"
            )
        timeout = conf.get("topology.message.timeout.secs")
        longest = self.timeout_secs * _BUCKETS / (_BUCKETS - 1) + tick
        if timeout is not None and longest >= timeout:
            ticks = "" if tick == own_tick else f" and a tick every {tick:g} s"
            raise InvalidConfigError(
                f"{where}: with_timeout({self.timeout_secs:g}){ticks} lets a key wait up to "
                f"{longest:g} s, not below topology.message.timeout.secs = "
                f"{timeout}: its tuples would time out first; lower with_timeout"
            )

    # --- running -------------------------------------------------------------------------
    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        cid = context.get_this_component_id()
        self.validate_topology_conf(cid, conf)
        self.collector = collector
        where = f"join bolt {cid!r}"
        sources = context.get_this_sources()
        tasks = len(context.get_component_tasks(cid))
        by_source: dict[str, list[tuple[str, str]]] = {s: [] for s in self.keys}
        for (comp, stream), grouping in sources.items():
            if stream.startswith("__"):
                continue  # a system stream (checkpoint barriers): a wrapper's, not the join's
            name = comp if self.selector == COMPONENT else stream
            if name not in self.keys:
                # execute could not place its tuples: refused now, not on the first one
                raise InvalidGroupingError(
                    f"{where}: subscribes to {comp!r}:{stream!r} but joins no {self.selector} "
                    f"{name!r} (it joins {list(self.keys)}); join it with "
                    f".join({name!r}, field, prior) or drop the subscription"
                )
            by_source[name].append((comp, stream))
            key = self.keys[name]
            fields = context.get_component_output_fields(comp, stream)
            if key not in fields:
                raise InvalidComponentError(
                    f"{where}: input {comp!r}:{stream!r} (joined as {name!r}) has no key field "
                    f"{key!r} (its fields: {list(fields)})"
                )
            if tasks > 1 and (
                grouping.kind is not GroupingKind.FIELDS or list(grouping.fields or ()) != [key]
            ):
                raise InvalidGroupingError(
                    f"{where}: input {comp!r}:{stream!r} must be fields-grouped on {key!r} so "
                    f"that one key meets on one task; use fields_grouping({comp!r}, "
                    f"Fields({key!r}){'' if stream == 'default' else f', {stream!r}'})"
                )
        missing = [s for s, subs in by_source.items() if not subs]
        if missing:
            raise InvalidGroupingError(
                f"{where}: joins {missing[0]!r} but subscribes to no such {self.selector}; "
                f"subscribe to it"
            )
        # which source gives each selected field; its position is looked up in each tuple's
        # own fields, as two components may emit one joined stream in different orders
        self._picks: list[tuple[int, str]] = []
        order = list(self.keys)
        for src, field in self.selected:
            candidates = [src] if src is not None else order
            found = []
            for s in candidates:
                if s not in self.keys:
                    raise InvalidComponentError(f"{where}: select names unknown source {s!r}")
                inputs = {
                    (comp, stream): context.get_component_output_fields(comp, stream)
                    for comp, stream in by_source[s]
                }
                if any(field in fields for fields in inputs.values()):
                    for (comp, stream), fields in inputs.items():
                        if field not in fields:
                            raise InvalidComponentError(
                                f"{where}: input {comp!r}:{stream!r} (joined as {s!r}) has no "
                                f"selected field {field!r} (its fields: {list(fields)}); "
                                f"declare it there or select another field"
                            )
                    found.append(s)
            if not found:
                raise InvalidComponentError(
                    f"{where}: no joined source has the selected field {field!r}"
                )
            if len(found) > 1:
                raise InvalidComponentError(
                    f"{where}: field {field!r} is in several sources "
                    f"({found}); select it as 'source:{field}'"
                )
            self._picks.append((order.index(found[0]), field))
        self._order = order
        #: (key, arrival number) -> (side, tuple): each tuple expires on its own
        self.pending: TimeCacheMap[tuple[Any, int], tuple[int, Tuple]] = TimeCacheMap(
            self.timeout_secs or 1.0, context.clock, self._expired, _BUCKETS
        )
        #: key -> per side, arrival number -> tuple (the tuples waiting, for the join)
        self.by_key: dict[Any, list[dict[int, Tuple]]] = {}
        self._joined: set[int] = set()
        self._arrivals = 0
        self.unjoined = 0

    def _expired(self, entry: tuple[Any, int], value: tuple[int, Tuple]) -> None:
        key, n = entry
        side, t = value
        sides = self.by_key[key]
        del sides[side][n]
        if not any(sides):
            del self.by_key[key]
        if n in self._joined:
            self._joined.discard(n)
            self.collector.ack(t)
        else:
            self.unjoined += 1
            self.collector.fail(t)

    def execute(self, tuple: Tuple) -> None:
        if is_tick_tuple(tuple):
            self.pending.expire()
            return
        self.pending.expire()
        name = tuple.source_component if self.selector == COMPONENT else tuple.source_stream
        side = self._order.index(name)
        key = tuple[self.keys[name]]
        n = self._arrivals
        self._arrivals += 1
        sides = self.by_key.get(key)
        if sides is None:
            sides = self.by_key[key] = [{} for _ in self._order]
        others = [list(d.items()) if i != side else [(n, tuple)] for i, d in enumerate(sides)]
        if all(others):
            picks = self._picks
            emit = self.collector.emit
            for combo in itertools.product(*others):
                joined = [t for _, t in combo]
                emit([joined[i].get_value_by_field(f) for i, f in picks], anchors=joined)
                self._joined.update(m for m, _ in combo)
        sides[side][n] = tuple
        self.pending.put((key, n), (side, tuple))
