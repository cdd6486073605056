"""``squall submit --runner spark MODULE:FUNCTION``: run a topology on Spark.

``squall`` (the engine's command) finds ``main`` here by its name among the installed
runners (the ``squall.runners`` entry point group), so the engine never imports spark_io. ``FUNCTION`` returns a topology or a
``(topology, conf)`` pair, as for ``squall run``; the Spark types of the bolts' streams
come from ``--schema`` and from a ``SPARK_SCHEMAS`` mapping in ``MODULE`` (flags win).

Exit status: 0 the query ended (``availableNow``: every row available at the start done)
or ``--timeout`` stopped a ``--trigger-secs`` query; 1 the query failed; 2 bad usage.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Mapping
from typing import Any

from engine.runners import RunnerUsageError, load_topology, parse_conf

from .._errors import SparkConfigError, SparkIOError
from .._session import SessionConfig, spark_session

__all__ = ["main"]


def _pairs(items: list[str], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise RunnerUsageError(f"squall submit: {flag} takes KEY=VALUE, got {item!r}")
        out[key] = value
    return out


def _module_schemas(module: Any, topology: Any) -> dict[str, str]:
    """The module's ``SPARK_SCHEMAS`` entries for this topology's components: a module that
    builds several topologies types all their bolts in one mapping, so a key naming a
    component of another topology is not this one's business (a key naming a component
    of this topology with a wrong stream still fails, in ``compile``)."""
    given = getattr(module, "SPARK_SCHEMAS", None) or {}
    if not isinstance(given, Mapping):
        raise RunnerUsageError(
            f"squall submit: {module.__name__}.SPARK_SCHEMAS is a {type(given).__name__}; make "
            f"it a dict 'component[:stream]' -> 'field TYPE, ...'",
            code=1,
        )
    return {
        str(key): value
        for key, value in given.items()
        if str(key).partition(":")[0] in topology.components
    }


def _parser() -> argparse.ArgumentParser:
    assert __doc__ is not None
    p = argparse.ArgumentParser(
        prog="squall submit --runner spark", description=__doc__.split("\n")[0]
    )
    p.add_argument("target", help="MODULE:FUNCTION returning a topology, or (topology, conf)")
    p.add_argument("--checkpoint", required=True, help="the query's checkpoint directory")
    p.add_argument(
        "--master",
        default="local[2]",
        help="Spark master: local[N], local[N,F], local-cluster[W,C,MB] or a cluster's URL "
        "(default %(default)s)",
    )
    p.add_argument(
        "--schema",
        action="append",
        default=[],
        metavar="COMPONENT[:STREAM]=DDL",
        help="Spark types of a bolt's stream, e.g. 'count=word STRING, n BIGINT' (repeatable)",
    )
    p.add_argument(
        "--batch-rows",
        action="append",
        default=[],
        metavar="SPOUT=N",
        help="rows per spout task per micro-batch (repeatable)",
    )
    p.add_argument(
        "--trigger-secs",
        type=float,
        default=None,
        help="a micro-batch every SECS until stopped (default: everything available now, then "
        "stop)",
    )
    p.add_argument("--timeout", type=float, default=None, help="seconds before stopping")
    p.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="topology config"
    )
    p.add_argument(
        "--spark-conf", action="append", default=[], metavar="KEY=VALUE", help="Spark setting"
    )
    p.add_argument("--name", default=None, help="the query's name")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _submit(args)
    except RunnerUsageError as exc:
        print(exc, file=sys.stderr)
        return exc.code


def _submit(args: argparse.Namespace) -> int:
    from ._compile import SparkRunner, check_topology

    topology, conf = load_topology(args.target)
    try:
        check_topology(topology)  # refusals before a Spark session costs seconds
    except SparkConfigError as exc:
        print(f"squall submit: {exc}", file=sys.stderr)
        return 1
    conf.update(parse_conf(args.conf))
    module = importlib.import_module(args.target.partition(":")[0])
    schemas = _module_schemas(module, topology)
    schemas.update(_pairs(args.schema, "--schema"))
    batch_rows: dict[str, Any] = {}
    for key, value in _pairs(args.batch_rows, "--batch-rows").items():
        try:
            batch_rows[key] = int(value)
        except ValueError:
            raise RunnerUsageError(
                f"squall submit: --batch-rows {key}={value!r}: not an int"
            ) from None
    spark = spark_session(
        SessionConfig(
            master=args.master,
            app_name=args.name or args.target,
            conf=_pairs(args.spark_conf, "--spark-conf"),
        )
    )
    try:
        runner = SparkRunner(spark)
        compiled = runner.compile(topology, conf, schemas=schemas, batch_rows=batch_rows)
        print(f"squall submit: the topology on Spark\n{compiled.describe()}", flush=True)
        run = runner.start(
            compiled,
            checkpoint_location=args.checkpoint,
            trigger_secs=args.trigger_secs,
            query_name=args.name,
        )
        ended = run.await_termination(args.timeout)
        if not ended:
            run.stop()
        progress = run.last_progress()
        batch = None if progress is None else progress.get("batchId")
        where = "" if batch is None else f" after micro-batch {batch}"
        print(f"squall submit: query {run.id} {'ended' if ended else 'stopped'}{where}")
        return 0
    except (SparkIOError, ValueError) as exc:
        print(f"squall submit: {exc}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
