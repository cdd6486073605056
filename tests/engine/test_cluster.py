"""LocalCluster, complete_topology and the squall command."""

from __future__ import annotations

import collections
import subprocess
import sys
from pathlib import Path

import pytest

from engine import LocalCluster, TopologyBuilder, TopologyStateError, run_topology
from engine.testing import advance_time, complete_topology, simulate

from .test_runtime import QuietSpout
from .topologies import CollectBolt, ListSpout, SplitBolt, sentences, word_count_topology

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
        cluster.rebalance("wc", {"count": 1, "split": 1})
        # num_tasks is fixed for the topology's life: one task, so at most one executor.
        cluster.rebalance("wc", {"count": 3})
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
        cluster.rebalance("t", {"split": 4})
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


def test_complete_topology_times_out_naming_the_last_error() -> None:
    builder = TopologyBuilder()
    builder.set_spout("src", QuietSpout())  # declares one field, the mock emits two
    with pytest.raises(TimeoutError, match=r"last error: \[src task 2\] EmitError"):
        complete_topology(
            builder.create_topology(), mocked_sources={"src": [[1, 2]]}, timeout_secs=0.2
        )


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
        [sys.executable, "-m", "engine._cli", "run", "tiny_topology:build", "--timeout", "60"],
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
        [sys.executable, "-m", "engine._cli", "run", "no_colon_here"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert "squall: expected MODULE:FUNCTION, got 'no_colon_here'" in proc.stderr
