"""A slow, obviously-correct model of windows, to check ``WindowManager`` against.

It keeps every event ever added with a present/left flag and rescans them all at every
step; window ends are walked one grid step at a time, empty or not. Times are integer ns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.windowing import Count, Duration


@dataclass
class Event:
    id: int
    ts: int
    seq: int
    present: bool = True


@dataclass
class Fired:
    ids: list[int]
    new: list[int]
    expired: list[int]
    start: int
    end: int


@dataclass
class NaiveWindows:
    length: Count | Duration
    slide: Count | Duration
    event_time: bool = False
    origin: int = 0
    events: list[Event] = field(default_factory=list)
    watermark: int | None = None
    done_until: int | None = None  # the last window end walked
    since_fire: int = 0
    prev: set[int] = field(default_factory=set)
    expired: list[int] = field(default_factory=list)
    evicted: list[int] = field(default_factory=list)
    late: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.event_time and isinstance(self.slide, Duration):
            self.done_until = self.origin - self.slide.ns

    def present(self) -> list[Event]:
        return sorted((e for e in self.events if e.present), key=lambda e: (e.ts, e.seq))

    def leave(self, gone: list[Event]) -> None:
        for e in sorted(gone, key=lambda e: (e.ts, e.seq)):
            e.present = False
            self.expired.append(e.id)
            self.evicted.append(e.id)

    def fire(self, held: list[Event], end: int) -> Fired | None:
        if not held and not self.expired:
            return None
        ids = [e.id for e in held]
        new = [e.id for e in held if e.id not in self.prev]
        self.prev = set(ids)
        expired, self.expired = self.expired, []
        if isinstance(self.length, Duration) and isinstance(self.slide, Duration):
            start = end - self.length.ns
        elif held:
            start = held[0].ts
            if isinstance(self.slide, Count):
                end = held[-1].ts
        else:
            start = end
        return Fired(ids, new, expired, start, end)

    def add(self, id: int, ts: int) -> list[Fired]:
        if self.event_time and self.watermark is not None and ts <= self.watermark:
            self.late.append(id)
            return []
        if not self.event_time and isinstance(self.slide, Duration):
            assert self.done_until is not None
            ts = max(ts, self.done_until + 1)  # it arrived after the window that fired
        self.events.append(Event(id, ts, len(self.events)))
        if isinstance(self.length, Count):
            held = [e for e in self.events if e.present]  # arrival order
            if len(held) > self.length.n:
                self.leave(held[: len(held) - self.length.n])
        if isinstance(self.slide, Count):
            self.since_fire += 1
            if self.since_fire == self.slide.n:
                self.since_fire = 0
                if isinstance(self.length, Duration):
                    self.leave([e for e in self.present() if e.ts <= ts - self.length.ns])
                f = self.fire(self.present(), ts)
                if isinstance(self.length, Count):  # the next window keeps the newest n - s
                    held = [e for e in self.events if e.present]
                    keep = self.length.n - self.slide.n
                    self.leave(held[: max(0, len(held) - keep)])
                return [f] if f else []
        return []

    def advance(self, now: int) -> list[Fired]:
        if self.event_time:
            if self.watermark is not None and now <= self.watermark:
                return []
            self.watermark = now
        if isinstance(self.slide, Count):
            if isinstance(self.length, Duration):
                self.leave([e for e in self.present() if e.ts <= now - self.length.ns])
            return []
        step = self.slide.ns
        out: list[Fired] = []
        start = self.done_until
        if start is None:  # event time: walk from below the oldest event
            held = self.present()
            if not held:
                return out
            start = (held[0].ts // step - 1) * step
        end = start + step
        while end <= now:
            if isinstance(self.length, Duration):
                self.leave([e for e in self.present() if e.ts <= end - self.length.ns])
            f = self.fire([e for e in self.present() if e.ts <= end], end)
            if f:
                out.append(f)
            if isinstance(self.length, Duration):  # the next window cannot hold these
                self.leave([e for e in self.present() if e.ts <= end + step - self.length.ns])
            self.done_until = end
            end += step
        return out

    def take_evicted(self) -> list[Any]:
        out, self.evicted = self.evicted, []
        return out
