"""LocalCluster, complete_topology and the squall command."""

from __future__ import annotations

import asyncio
import collections
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engine import (
    Bolt,
    InvalidDeclarationError,
    InvalidRebalanceError,
    LocalCluster,
    TopologyBuilder,
    TopologyStateError,
    run_topology,
)
from engine.testing import advance_time, complete_topology, simulate

from .test_runtime import QuietSpout
from .topologies import (
    CollectBolt,
    ListSpout,
    NeverAckBolt,
    SplitBolt,
    sentences,
    word_count_topology,
)

ROOT = Path(__file__).resolve().parents[2]


def test_local_cluster_lifecycle() -> None:
    items = sentences(500)
    with LocalCluster() as cluster:
        cluster.submit_topology("wc", {"topology.seed": 3}, word_count_topology(items, 2))
        assert cluster.get_topology_names() == ["wc"]
        with pytest.raises(TopologyStateError, match="a topology named 'wc' is already running"):
            cluster.submit_topology("wc", None, word_count_topology(items, 1))
        cluster.wait_until_complete("wc", timeout=30)
        info = cluster.get_topology_info("wc")
        assert info.components["sentences"].acked == 500
        assert info.components["count"].executed == 2500
        assert set(info.components["count"].tasks) == {1, 2}  # sorted ids: count, sentences, split
        cluster.kill_topology("wc", wait_secs=1)
        assert cluster.get_topology_names() == []
        with pytest.raises(TopologyStateError, match=r"no topology named 'wc' is running"):
            cluster.get_topology_info("wc")


def test_deactivate_stops_next_tuple_and_activate_resumes() -> None:
    # Virtual time: a minute of deactivation costs nothing and no sleep orders anything.
    items = [[i, f"s{i}"] for i in range(2000)]
    builder = TopologyBuilder()
    builder.set_spout("src", ListSpout(items))
    builder.set_bolt("sink", CollectBolt()).shuffle_grouping("src")

    async def scenario() -> None:
        conf = {"topology.max.spout.pending": 100, "topology.seed": 3}
        async with run_topology(builder.create_topology(), conf) as running:
            running.deactivate()
            await running.wait_until_idle(timeout=10)
            before = running.info().components["src"].emitted
            assert 0 < before < 2000
            await advance_time(60)
            info = running.info()
            assert info.status == "INACTIVE"
            assert info.components["src"].emitted == before
            running.activate()
            await running.wait_until_complete(timeout=60)
            (spout,) = running.task_objects("src").values()
            assert sorted(spout.acked) == list(range(2000))
            assert spout.emitted_while_inactive == 0
            assert (spout.activations, spout.deactivations) == (2, 1)

    simulate(scenario())


def test_local_cluster_deactivate_and_activate_apply_before_they_return() -> None:
    items = [[i, f"s{i}"] for i in range(2000)]
    builder = TopologyBuilder()
    builder.set_spout("src", ListSpout(items))
    builder.set_bolt("sink", CollectBolt()).shuffle_grouping("src")
    with LocalCluster() as cluster:
        cluster.submit_topology("t", {"topology.max.spout.pending": 100}, builder.create_topology())
        cluster.deactivate("t")
        assert cluster.get_topology_info("t").status == "INACTIVE"
        cluster.wait_until_idle("t", timeout=10)
        cluster.activate("t")
        assert cluster.get_topology_info("t").status == "ACTIVE"
        cluster.wait_until_complete("t", timeout=30)
        assert cluster.get_topology_info("t").components["src"].acked == 2000
        cluster.kill_topology("t", wait_secs=0)


def test_rebalance_changes_executors_and_keeps_tasks() -> None:
    items = sentences(3000)
    with LocalCluster() as cluster:
        cluster.submit_topology(
            "wc", {"topology.max.spout.pending": 50}, word_count_topology(items, 1)
        )
        before = cluster.get_topology_info("wc")
        assert before.components["count"].executors == 1
        assert cluster.rebalance("wc", {"count": 1, "split": 1}) == {"count": 1, "split": 1}
        # num_tasks is fixed for the topology's life: one task, so at most one executor.
        assert cluster.rebalance("wc", {"count": 3}) == {"count": 1}
        after = cluster.get_topology_info("wc")
        assert after.components["count"].executors == 1
        cluster.wait_until_complete("wc", timeout=30)
        assert cluster.get_topology_info("wc").components["sentences"].acked == 3000
        cluster.kill_topology("wc", wait_secs=0)


def test_rebalance_spreads_tasks_over_more_executors() -> None:
    items = sentences(3000)
    builder = TopologyBuilder()
    builder.set_spout("sentences", ListSpout([[i, s] for i, s in enumerate(items)]))
    builder.set_bolt("split", SplitBolt(), 1).set_num_tasks(4).shuffle_grouping("sentences")
    builder.set_bolt("sink", CollectBolt(), 1).shuffle_grouping("split")
    with LocalCluster() as cluster:
        cluster.submit_topology("t", {"topology.max.spout.pending": 50}, builder.create_topology())
        assert cluster.get_topology_info("t").components["split"].executors == 1
        assert cluster.rebalance("t", {"split": 4}) == {"split": 4}
        info = cluster.get_topology_info("t")
        assert info.components["split"].executors == 4
        assert len(info.components["split"].tasks) == 4
        cluster.wait_until_complete("t", timeout=30)
        info = cluster.get_topology_info("t")
        assert info.components["sentences"].acked == 3000
        assert info.components["sink"].executed == 5 * 3000
        with pytest.raises(TopologyStateError, match="has no component 'nope' to rebalance"):
            cluster.rebalance("t", {"nope": 2})
        cluster.kill_topology("t", wait_secs=0)


def test_complete_topology_with_mocked_sources() -> None:
    builder = TopologyBuilder()
    builder.set_spout("sentences", ListSpout([]))  # replaced by the mock
    builder.set_bolt("split", SplitBolt(), 2).shuffle_grouping("sentences")
    builder.set_bolt("sink", CollectBolt(), 2).shuffle_grouping("split")
    topology = builder.create_topology()
    # The mock declares the replaced spout's streams: ("id", "sentence").
    result = complete_topology(
        topology,
        mocked_sources={"sentences": [[0, "a b"], [1, "b c a"]]},
        conf={"topology.seed": 1},
    )
    assert sorted(result.emitted("sentences")) == [[0, "a b"], [1, "b c a"]]
    words = collections.Counter(v[0] for v in result.emitted("split"))
    assert words == {"a": 2, "b": 2, "c": 1}
    assert sorted(result.emitted("split")) == [
        ["a", 0, 0],
        ["a", 1, 2],
        ["b", 0, 1],
        ["b", 1, 0],
        ["c", 1, 1],
    ]
    assert result.acked("sentences") == [0, 1]
    assert result.failed("sentences") == []
    assert result.emitted("sink") == []


class RaisingSpout(QuietSpout):
    def next_tuple(self) -> None:
        raise ValueError("no data")


def test_complete_topology_times_out_naming_the_last_error() -> None:
    builder = TopologyBuilder()
    builder.set_spout("src", RaisingSpout())  # never exhausted
    with pytest.raises(TimeoutError, match=r"last error: \[src task 2\] ValueError\('no data'\)"):
        complete_topology(builder.create_topology(), timeout_secs=0.2)


def test_mocked_tuples_that_do_not_fit_the_stream_are_refused_before_the_run() -> None:
    # Found in review: the mock's emit failed on every next_tuple (thousands of errors)
    # until complete_topology timed out, 60 s by default.
    builder = TopologyBuilder()
    builder.set_spout("src", QuietSpout())  # declares one field, the mock emits two
    topology = builder.create_topology()
    with pytest.raises(
        InvalidDeclarationError,
        match=re.escape(
            "mocked_sources['src']: FixedTupleSpout tuple 0 [1, 2] has 2 values, but stream "
            "'default' declares 1 fields ['x']; give every tuple one value per field"
        ),
    ):
        complete_topology(topology, mocked_sources={"src": [[1, 2]]})
    with pytest.raises(
        InvalidDeclarationError,
        match=re.escape(
            "mocked_sources['src']: FixedTupleSpout has tuples for stream 'other', which it "
            "does not declare (its streams: ['default']); declare it in streams"
        ),
    ):
        complete_topology(topology, mocked_sources={"src": {"other": [[1]]}})


def test_complete_topology_rejects_unknown_mocked_spout() -> None:
    builder = TopologyBuilder()
    builder.set_spout("src", QuietSpout())
    with pytest.raises(Exception, match=r"mocked_sources names 'nope', which is not a spout"):
        complete_topology(builder.create_topology(), mocked_sources={"nope": [[1]]})


def test_squall_run_command(tmp_path: Path) -> None:
    module = tmp_path / "tiny_topology.py"
    module.write_text(
        "from tests.engine.topologies import sentences, word_count_topology\n"
        "def build():\n"
        "    return word_count_topology(sentences(300), 2), {'topology.seed': 4}\n"
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "engine._command.cli",
            "run",
            "tiny_topology:build",
            "--timeout",
            "60",
        ],
        cwd=tmp_path,
        env={"PYTHONPATH": f"{ROOT / 'src'}:{ROOT}", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "topology 'tiny_topology': COMPLETED" in proc.stdout
    assert "seed 4" in proc.stdout
    lines = {line.split()[0]: line.split() for line in proc.stdout.splitlines()[3:6]}
    assert lines["sentences"][2] == "300"  # emitted
    assert lines["count"][4] == "1,500"  # executed
    assert "acked" in proc.stderr  # the progress line


def test_squall_run_rejects_a_bad_target(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "engine._command.cli", "run", "no_colon_here"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert "squall: expected MODULE:FUNCTION, got 'no_colon_here'" in proc.stderr


def test_rebalance_refuses_values_out_of_range_before_anything_moves() -> None:
    builder = TopologyBuilder()
    builder.set_spout("sentences", QuietSpout())
    builder.set_bolt("split", SplitBolt(), 1).set_num_tasks(2).shuffle_grouping("sentences")
    wait_range = "wait_secs must be a finite number of seconds in 0..86400 (a day), got "
    with LocalCluster() as cluster:
        cluster.submit_topology("t", None, builder.create_topology())
        refused: list[tuple[Any, Any, str]] = [
            ({"split": 2}, float("inf"), wait_range + "inf"),
            ({"split": 2}, 1e9, wait_range + "1000000000.0"),
            ({"split": 2}, -1, wait_range + "-1"),
            ({"split": 2}, float("nan"), wait_range + "nan"),
            ({"split": 2}, "10", wait_range + "'10'"),
            (
                {"split": 0},
                None,
                "num_executors['split'] must be a positive integer (1 and up; at "
                "most 2 take effect, its task count), got 0",
            ),
            (
                {"split": 2.0},
                None,
                "num_executors['split'] must be a positive integer (1 and up; "
                "at most 2 take effect, its task count), got 2.0",
            ),
            (
                {"split": True},
                None,
                "num_executors['split'] must be a positive integer (1 and "
                "up; at most 2 take effect, its task count), got True",
            ),
            # Checked as a whole: the valid first entry is not applied either.
            (
                {"split": 2, "sentences": -3},
                None,
                "num_executors['sentences'] must be a "
                "positive integer (1 and up; at most 1 take effect, its task count), got -3",
            ),
            (
                {},
                None,
                "num_executors must map component ids to executor counts, e.g. "
                "{'split': 4}; got {}",
            ),
        ]
        for executors, wait, message in refused:
            with pytest.raises(InvalidRebalanceError) as caught:
                cluster.rebalance("t", executors, wait_secs=wait)
            assert str(caught.value) == message
            info = cluster.get_topology_info("t")
            assert info.status == "ACTIVE"
            assert info.components["split"].executors == 1
        # 10**23 is a positive integer: capped at the two tasks, and the result says so.
        assert cluster.rebalance("t", {"split": 10**23}, wait_secs=86_400) == {"split": 2}
        assert cluster.get_topology_info("t").components["split"].executors == 2
        cluster.kill_topology("t", wait_secs=0)


def _never_acked() -> Any:
    builder = TopologyBuilder()
    builder.set_spout("src", ListSpout([[i, f"s{i}"] for i in range(10)]))
    builder.set_bolt("sink", NeverAckBolt(), 1).set_num_tasks(2).shuffle_grouping("src")
    return builder.create_topology()


def test_an_abandoned_rebalance_leaves_the_topology_active() -> None:
    # A caller that gives up on a rebalance still waiting for in-flight trees (a client
    # disconnecting, a timeout around it) must not leave the topology deactivated.
    async def scenario() -> None:
        conf = {"topology.message.timeout.secs": 30}
        async with run_topology(_never_acked(), conf) as running:
            await advance_time(1)
            waiting = asyncio.get_running_loop().create_task(
                running.rebalance("sink", 2, wait_secs=60)
            )
            await advance_time(5)
            assert running.status == "INACTIVE"  # draining
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            assert running.status == "ACTIVE"
            assert running.info().components["sink"].executors == 1

    simulate(scenario())


def test_squall_rebalance_prints_what_was_applied(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from engine._command.cli import main

    builder = TopologyBuilder()
    builder.set_spout("sentences", QuietSpout())
    builder.set_bolt("split", SplitBolt(), 1).set_num_tasks(2).shuffle_grouping("sentences")
    with LocalCluster(ui=0) as cluster:
        cluster.submit_topology("t", None, builder.create_topology())
        url = ["--url", str(cluster.ui_url)]
        assert main(["rebalance", "t", "-e", "split=4", *url]) == 0
        assert capsys.readouterr().out == (
            "squall: rebalanced 't': split=2 executors (now ACTIVE)\n"
            "squall: 'split' got 2 executor(s), not 4: capped at its 2 task(s) (an executor "
            "runs at least one task; the task count is fixed at submission, raise it with "
            "set_num_tasks)\n"
        )
        # The client refuses a wait that is not a finite number as bad usage (exit 2)...
        with pytest.raises(SystemExit) as exited:
            main(["rebalance", "t", "-e", "split=1", "-w", "inf", *url])
        assert exited.value.code == 2
        assert capsys.readouterr().err.endswith(
            "squall rebalance: error: argument --wait/-w: must be a number of seconds, 0 or "
            "more, got 'inf'\n"
        )
        # ... and the server refuses one past a day, naming the range.
        assert main(["rebalance", "t", "-e", "split=1", "-w", "1e9", *url]) == 1
        assert capsys.readouterr().err == (
            "squall: wait must be a finite number of seconds in 0..86400 (a day), got 1000000000.0\n"
        )
        assert cluster.get_topology_info("t").components["split"].executors == 2


class LateAckBolt(Bolt):
    """Acks each input 3 s after it came: past a 1 s message timeout."""

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector

    async def execute(self, tuple: Any) -> None:
        await asyncio.sleep(3)
        self.collector.ack(tuple)

    def declare_output_fields(self, declarer: Any) -> None:
        pass


def test_every_report_counts_pending_trees_alike_after_late_acks() -> None:
    # Trees time out, then their acks arrive: the acker's ledger holds those late acks
    # until their own timeout, but no tree is pending any more, whoever reports it.
    from engine._command.cli import format_stats
    from engine.ui._api import topology_summary_json

    builder = TopologyBuilder()
    builder.set_spout("src", ListSpout([[i, f"s{i}"] for i in range(50)], replay=False))
    builder.set_bolt("late", LateAckBolt()).shuffle_grouping("src")

    async def scenario() -> None:
        conf = {"topology.message.timeout.secs": 1, "topology.seed": 1}
        async with run_topology(builder.create_topology(), conf, name="late") as running:
            await running.wait_until_complete(timeout=60)
            info = running.info()
            assert info.status == "COMPLETED"
            assert info.pending_trees == 0
            assert info.acker["pending_roots"] == 50  # the late acks
            assert topology_summary_json(info)["pendingTrees"] == 0
            assert format_stats(info).splitlines()[-1] == (
                "acker: 1 ledger(s), trees acked 0, failed 0, timed out 50, still pending 0 "
                "(ledger: 50 late acks of finished trees, dropped at their timeout)"
            )

    simulate(scenario())
