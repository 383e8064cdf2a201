"""`warehouse demo`: the bundled example warehouse end to end (`make demo`).

`main(args)` is what the CLI calls: it finds (or starts) the embedded broker on the
configured port, runs `run_demo` (once) or `run_continuous` (`--continuous`), and
stops the broker again if it started it.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from warehouse.demo.run import DemoResult, render_summary, render_table, reset_state, run_demo

if TYPE_CHECKING:
    from warehouse.project import Project

__all__ = [
    "DemoResult",
    "demo_broker",
    "main",
    "render_summary",
    "render_table",
    "reset_state",
    "run_demo",
]

logger = logging.getLogger(__name__)


def _out(text: str) -> None:
    print(text, flush=True)


@contextmanager
def demo_broker(project: Project, *, out=_out) -> Iterator[tuple[str, bool]]:
    """The project's Kafka: `(bootstrap, embedded)`.

    With `bootstrap: embedded` a live broker of the project's data folder is reused;
    otherwise one is started on the configured port and stopped on exit.
    """
    from streams.broker.launcher import broker_status, stop_broker
    from warehouse.runtime.bootstrap import resolve_bootstrap

    kafka = project.config.kafka
    if not kafka.is_embedded:
        yield kafka.bootstrap, False
        return
    data_dir = project.broker_dir()
    running = broker_status(data_dir)
    bootstrap = resolve_bootstrap(project, start=True)
    assert bootstrap is not None
    out(
        f"embedded broker: {'reusing the one' if running else 'started one'} at {bootstrap} "
        f"(data {data_dir})"
    )
    try:
        yield bootstrap, True
    finally:
        if not running:
            stop_broker(data_dir)
            out("embedded broker stopped")


def main(args: argparse.Namespace) -> int:
    from warehouse.project import Project
    from warehouse.runtime.session import get_session

    events = getattr(args, "events", 3000)
    seed = getattr(args, "seed", 7)
    rate = getattr(args, "rate", 20.0)
    if events < 0 or rate <= 0:
        from warehouse.generate import GenerateArgumentError

        raise GenerateArgumentError(
            f"`--events` must be >= 0 and `--rate` > 0 (got `{events}` and `{rate}`); "
            "e.g. `warehouse demo --events 3000` or `warehouse demo --continuous --rate 20`."
        )
    project = Project.load(args.project, env=args.env)
    _out(
        f"warehouse demo: project {project.path}, {len(project.tables)} tables, root {project.root}"
    )
    with demo_broker(project) as (bootstrap, embedded):
        _out("starting Spark ...")
        if project.config.spark.master.startswith("local"):
            # A local demo talks to itself only; saves Spark's warning about the host name.
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        spark = get_session(project.config.spark, app_name="warehouse-demo")
        spark.sparkContext.setLogLevel("FATAL")  # the demo prints its own progress and errors
        if getattr(args, "continuous", False):
            from warehouse.demo.continuous import run_continuous

            return run_continuous(
                project,
                spark,
                bootstrap=bootstrap,
                rate=rate,
                seed=seed,
                initial_events=events,
                delete_old_topics=embedded,
                out=_out,
            )
        result = run_demo(
            project,
            spark,
            bootstrap=bootstrap,
            events=events,
            seed=seed,
            delete_old_topics=embedded,
            out=_out,
        )
    if result.exit_code:
        print("the checks failed; see the report above", file=sys.stderr)
    return result.exit_code
