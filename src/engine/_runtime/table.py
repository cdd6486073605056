"""``ExecutorTable``: the executors running one topology now, and the plan they carry out.

The runtime fills it, starts and stops what is in it, and asks it whether the topology is
idle; reconfiguration (crashes, rebalances) takes executors out and puts new ones in. Both
hold this one table, so neither reaches into the other for it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from .._execution.executor import BoltExecutor, Executor, SpoutExecutor
from .._model.context import TaskPlan

__all__ = ["ExecutorTable", "TaskExecutor"]

#: An executor of a component's tasks, spout or bolt: ``Executor`` declares what the table
#: does with either (``start``, ``run``, ``stop``), each kind doing it its own way (a spout
#: opens and calls ``next_tuple``, a bolt prepares and drains its inbox).
TaskExecutor = Executor


class ExecutorTable:
    """Every executor of a running topology, by kind and by task."""

    def __init__(self, plan: TaskPlan) -> None:
        #: the task plan as carried out now (a rebalance changes its ``executors``)
        self.plan = plan
        self.executors: list[TaskExecutor] = []
        self.spouts: list[SpoutExecutor] = []
        self.bolts: list[BoltExecutor] = []
        #: task id -> the executor serving it now
        self.of_task: dict[int, TaskExecutor] = {}
        #: executors whose start (open / prepare) completed and that were not removed since
        self.opened: set[TaskExecutor] = set()
        #: the coroutine of every executor running in the topology's task group
        self.running: dict[TaskExecutor, asyncio.Task[Any]] = {}

    def add(self, ex: TaskExecutor) -> None:
        """Take ``ex`` in; it serves its tasks from now on."""
        if isinstance(ex, SpoutExecutor):
            self.spouts.append(ex)
        else:
            assert isinstance(ex, BoltExecutor)
            self.bolts.append(ex)
        self.executors.append(ex)
        for t in ex.tasks:
            self.of_task[t] = ex

    async def remove(self, ex: TaskExecutor) -> None:
        """Stop ``ex``'s coroutine (if it runs: a rebalance undone may take out executors
        whose start failed or never came) and take it out (its objects get no cleanup
        call: a crash, or a rebalance that prepares them again)."""
        task = self.running.pop(ex, None)
        if task is not None:
            task.cancel()
            await asyncio.wait([task])  # its end, not its cancellation: ours still propagates
        self.executors.remove(ex)
        self.opened.discard(ex)
        if isinstance(ex, SpoutExecutor):
            self.spouts.remove(ex)
        elif isinstance(ex, BoltExecutor):  # (``add`` takes no other kind)
            self.bolts.remove(ex)

    def live(self) -> list[TaskExecutor]:
        """The executors now whose start completed (restarted ones included, crashed
        ones not): those whose objects get ``cleanup`` / ``close``."""
        return [ex for ex in self.executors if ex in self.opened]
