"""Producing the fixture project's records and reading its Delta tables back (delta-rs)."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from deltalake import DeltaTable

from streams.delta.arrow import read_table
from tests.integration.projects import new_topic
from tests.unit.runtime.projects import write_project

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def order(order_id: str | None, user: str, amount: float, minute: int) -> str:
    event_time = (T0 + dt.timedelta(minutes=minute)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return json.dumps(
        {"order_id": order_id, "user_id": user, "amount": amount, "event_time": event_time}
    )


def rows(path: Path, columns: list[str]) -> list[tuple[Any, ...]]:
    """The table's rows as sorted tuples of `columns`."""
    table = read_table(str(path), columns=columns)
    return sorted(tuple(r[c] for c in columns) for r in table.to_pylist())


def version(path: Path | str) -> int | None:
    path = Path(path)
    return DeltaTable(str(path)).version() if (path / "_delta_log").is_dir() else None


def forget_last_batch(checkpoint: Path | str) -> None:
    """Make Spark forget it finished the last batch, as after a crash between the
    Delta commit and its commit log: the next run replays that batch."""
    commits = Path(checkpoint) / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)


def at(minute: int) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minute)


def wait_for(predicate, *, timeout: float, what: str, log: Path, proc: subprocess.Popen) -> None:
    """Poll `predicate` every second while `proc` runs; fail with the run log's tail."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if predicate():
            return
        time.sleep(1)
    tail = "\n".join(
        line for line in log.read_text().splitlines() if not line.startswith(("\tat ", "["))
    )[-4000:]
    state = "timed out" if proc.poll() is None else f"run exited with {proc.returncode}"
    raise AssertionError(f"{state} waiting for {what}; run log:\n{tail}")


def orders_project(
    root: Path, bootstrap: str, unique: Callable[[str], str], *, partitions: int = 1, **kwargs: Any
) -> tuple[str, Path]:
    """Create a new `orders` topic (`partitions` partitions) at `bootstrap` and write the
    two-layer project reading it into `root`; `kwargs` as `write_project`'s. Returns the
    topic and the project's root."""
    topic = new_topic(bootstrap, unique("orders"), partitions=partitions)
    return topic, write_project(root, topic=topic, bootstrap=bootstrap, **kwargs)
