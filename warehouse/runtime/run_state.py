"""What a running table is doing, as the process running it says: `<root>/runs/<table>.json`.

`Pipeline.run` writes each of its tables' record (`RunStates`) when the table's query
starts, after each batch (its id, time, rows in, written and quarantined, dead letters
sent for a table with a dead-letter topic, the last `RECENT` batches kept), every
`HEARTBEAT_SECONDS` while it runs, and when it stops or fails. The record goes through `streams.storage`, so it is one small file written whole
on a local disk and one object on object storage, and readers see the old record or the
new one. `warehouse ui` reads them (`read_states`).

A process that dies (`kill -9`, a crash) writes no last record. A reader therefore
trusts a `running` record only while its process is alive: on the same host, while its
pid exists; elsewhere, while its heartbeat is younger than `STALE_SECONDS`.

Concurrency: a `RunStates` is written from the runner's thread and from the batch
threads of its queries (foreachBatch on the driver); one lock keeps each record's
read-modify-write whole.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

import streams.storage as storage
from warehouse.runtime.locks import this_process
from warehouse.spec.paths import run_state_path, table_exists

if TYPE_CHECKING:
    from warehouse.runtime.writer import BatchStats
    from warehouse.spec.model import LoadedProject

logger = logging.getLogger(__name__)

State = Literal["running", "idle", "stopped", "failed", "never run"]

RECENT = 20
"""Batches kept in a record."""
HEARTBEAT_SECONDS = 10.0
STALE_SECONDS = 30.0
"""A `running` record of a process on another host not renewed for this long is dead."""
IDLE_SECONDS = 15.0
"""A running table without a batch for this long is `idle` (waiting for input)."""

_COUNTERS = ("rows_in", "rows_written", "quarantined", "dropped")


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds")


class RunStates:
    """The records of one run's tables (see the module's docstring). `clock`: seconds
    since the epoch (tests pass their own)."""

    def __init__(
        self,
        project: LoadedProject,
        *,
        mode: Literal["once", "continuous"],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.project = project
        self.mode = mode
        self.clock = clock
        self._records: dict[str, dict[str, Any]] = {}
        self._seen: dict[str, dict[str, int]] = {}
        self._written: dict[str, float] = {}
        self._lock = threading.Lock()

    def started(self, name: str) -> None:
        now = self.clock()
        with self._lock:
            self._records[name] = {
                "table": name,
                "state": "running",
                "mode": self.mode,
                **this_process(),
                "started_at": _iso(now),
                "heartbeat_at": _iso(now),
                "heartbeat": now,
                "batches": [],
                "error": None,
            }
            self._seen[name] = dict.fromkeys(_COUNTERS, 0)
            self._write(name, now)

    def batch(self, name: str, batch_id: int, stats: BatchStats) -> None:
        """After batch `batch_id` of `name`: its rows from the query's counters."""
        now = self.clock()
        with self._lock:
            record = self._records.get(name)
            if record is None:
                return
            seen = self._seen[name]
            now_counts = {k: int(getattr(stats, k)) for k in _COUNTERS}
            if stats.dead_letters is not None:  # a table with a dead-letter topic
                now_counts["dead_letters"] = stats.dead_letters
            done = {k: n - seen.get(k, 0) for k, n in now_counts.items()}
            self._seen[name] = now_counts
            entry = {"batch_id": batch_id, "at": _iso(now), **done, "version": stats.last_version}
            record["batches"] = [*record["batches"], entry][-RECENT:]
            self._beat(record, now)
            self._write(name, now)

    def beat(self) -> None:
        """Renew the heartbeat of records not written for `HEARTBEAT_SECONDS`."""
        now = self.clock()
        with self._lock:
            for name, record in self._records.items():
                if record["state"] == "running" and now - self._written[name] >= HEARTBEAT_SECONDS:
                    self._beat(record, now)
                    self._write(name, now)

    def stopped(self, name: str) -> None:
        self._end(name, "stopped", None)

    def failed(self, name: str, error: BaseException | str | None) -> None:
        if name not in self._records:  # failed to start
            self.started(name)
        self._end(name, "failed", str(error) if error is not None else "failed")

    def stop_all(self) -> None:
        """Every table still `running` stopped (the run ended)."""
        for name in [n for n, r in self._records.items() if r["state"] == "running"]:
            self.stopped(name)

    def _end(self, name: str, state: State, error: str | None) -> None:
        now = self.clock()
        with self._lock:
            record = self._records.get(name)
            if record is None or record["state"] != "running":
                return
            record.update(state=state, error=error, ended_at=_iso(now))
            self._beat(record, now)
            self._write(name, now)

    @staticmethod
    def _beat(record: dict[str, Any], now: float) -> None:
        record["heartbeat"] = now
        record["heartbeat_at"] = _iso(now)

    def _write(self, name: str, now: float) -> None:
        self._written[name] = now
        try:
            # Not synced: the record is written after every batch, inside the batch, and a
            # machine's crash makes it stale anyway (a reader trusts it only while its
            # process lives).
            storage.write_text(
                run_state_path(self.project.root, name),
                json.dumps(self._records[name]),
                durable=False,
            )
        except (OSError, storage.StorageError) as e:
            # The record is for people watching; a store that refuses it must not fail a batch.
            logger.warning("table %s: run state not written: %s", name, e)


def _alive(record: dict[str, Any], now: float) -> bool:
    """Whether the process of a `running` record still runs (see the module's docstring)."""
    if now - float(record.get("heartbeat", 0)) > STALE_SECONDS:
        return False
    if record.get("host") != socket.gethostname():
        return True
    try:
        os.kill(int(record["pid"]), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, KeyError, TypeError, ValueError):
        return True
    return True


def _judge(record: dict[str, Any] | None, *, exists: bool, now: float) -> dict[str, Any]:
    """A table's state for readers: the record's, with a dead `running` one `failed` and a
    live one `idle` after `IDLE_SECONDS` without a batch."""
    if record is None:
        return {"state": "stopped" if exists else "never run", "record": None}
    state: str = record.get("state", "stopped")
    reason = record.get("error")
    if state == "running" and not _alive(record, now):
        state = "failed"
        reason = (
            f"the process (pid {record.get('pid')} on {record.get('host')}) ended without "
            "stopping its query: killed, or it crashed"
        )
    elif state == "running":
        batches = record.get("batches") or []
        last = datetime.fromisoformat(batches[-1]["at"] if batches else record["started_at"])
        if now - last.timestamp() > IDLE_SECONDS:
            state = "idle"
    return {"state": state, "reason": reason, "record": record}


def read_states(
    project: LoadedProject, names: Iterable[str], *, now: float | None = None
) -> dict[str, dict[str, Any]]:
    """Per table of `names`: `{"state", "reason", "record"}`, `state` one of `State`, the
    record as the running process last wrote it (None if none ever did)."""
    at = time.time() if now is None else now
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        text = storage.read_text(run_state_path(project.root, name))
        try:
            record = json.loads(text) if text else None
        except ValueError:
            record = None
        exists = record is not None or table_exists(project.table_path(name))
        out[name] = _judge(record, exists=exists, now=at)
    return out
