"""`warehouse demo`: the bundled example warehouse end to end (`make demo`).

`run_demo` runs the example once (`warehouse.demo.continuous.run_continuous` keeps
it running); `demo_broker` finds (or starts) the embedded broker it runs on. The
CLI's `warehouse demo` (warehouse.cli.commands) wires them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from warehouse.demo.run import (
    DemoProjectError,
    DemoResult,
    check_demo_project,
    render_summary,
    render_table,
    reset_state,
    run_demo,
)

if TYPE_CHECKING:
    from warehouse.project import Project

__all__ = [
    "DemoProjectError",
    "DemoResult",
    "check_demo_project",
    "demo_broker",
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
