"""What the pipeline page shows, as plain data (no web framework here).

Each table's state comes from the state records the processes running it write
(`warehouse.runtime.run_state`); its Delta version, rows, last commit, lag (Kafka records behind, or versions of its input tables),
quarantine rows, expectation totals and how far its dead letters are sent from
`warehouse status` (`warehouse.runtime.status`), read again at most every
`STATUS_SECONDS`; its quarantine reasons (as often) and definition when the page asks
for that table.

The lag and the dead letters' positions are read with Kafka clients, one of each kind
per cluster, that the view keeps open (`ClusterReaders`) until `close`, not one per table
and read.

Concurrency: a `PipelineView` is shared by the web server's request threads; one lock
guards its cache, and a status read under way is not started twice. `close` is called
once, when the server has stopped.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warehouse.quality import recent_quarantine
from warehouse.runtime.run_state import read_states
from warehouse.runtime.status import (
    ClusterReaders,
    dead_letters_text,
    status,
    versions_behind_text,
)

if TYPE_CHECKING:
    from warehouse.spec.model import LoadedProject

STATUS_SECONDS = 2.0
RUNNING = ("running", "idle")


class PipelineView:
    """The page's data of one project (see the module's docstring)."""

    def __init__(self, project: LoadedProject, *, clock: Callable[[], float] = time.time) -> None:
        self.project = project
        self.clock = clock
        self._status: dict[str, dict[str, Any]] = {}
        self._status_at = float("-inf")
        self._quarantine: dict[str, tuple[float, dict[str, Any]]] = {}
        self._readers = ClusterReaders()
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close the Kafka consumers the view keeps (a later read opens them again)."""
        with self._lock:
            self._readers.close()

    # -- the graph ----------------------------------------------------------------

    def graph(self) -> dict[str, Any]:
        """Tables as nodes placed in a column per layer (ODS left), edges upstream →
        downstream, each with its kind (`source`, `join`, `static`)."""
        g = self.project.graph
        layers: dict[str, list[str]] = {}
        for name in g.nodes:
            layers.setdefault(self.project.tables[name].layer, []).append(name)
        nodes = []
        for name in g.nodes:
            defn = self.project.tables[name]
            column = layers[defn.layer]
            nodes.append(
                {
                    "table": name,
                    "layer": defn.layer,
                    "x": defn.layer_index * 260,
                    "y": column.index(name) * 110,
                }
            )
        edges = [
            {"upstream": e.upstream, "downstream": e.downstream, "kind": e.kind}
            for e in g.edges
            if e.upstream in self.project.tables
        ]
        return {"nodes": nodes, "edges": edges}

    # -- live state -----------------------------------------------------------------

    def _statuses(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            if self.clock() - self._status_at >= STATUS_SECONDS:
                rows = status(self.project, readers=self._readers)
                self._status = {r["table"]: r for r in rows}
                self._status_at = self.clock()
            return self._status

    def snapshot(self) -> dict[str, Any]:
        """`{"run": ..., "tables": {name: row}}`: per table its state, the reason of a
        failure, the last batch (id, time, rows in, written, quarantined), the recent
        batches, Delta version and rows, lag, quarantine rows, expectation pass rates
        and dead letters (`dead_letters_progress`); `run`: the processes running tables
        now, or how the last run ended."""
        names = self.project.graph.nodes
        states = read_states(self.project, names, now=self.clock())
        statuses = self._statuses()
        tables = {n: _table_row(n, states[n], statuses.get(n, {})) for n in names}
        return {"run": _run_summary(states), "tables": tables}

    def details(self, name: str) -> dict[str, Any]:
        """A table's definition (its files' text) and its quarantine's recent reasons."""
        defn = self.project.tables[name]
        files = [defn.path, *([defn.sql_path] if defn.sql_path else [])]
        definition = [
            {"file": f, "text": (Path(self.project.path) / f).read_text(encoding="utf-8")}
            for f in files
        ]
        return {
            "table": name,
            "layer": defn.layer,
            "definition": definition,
            "quarantine": self._recent_quarantine(name),
        }

    def _recent_quarantine(self, name: str) -> dict[str, Any]:
        """The quarantine's rows and newest reasons, read again at most every
        `STATUS_SECONDS` (the page asks every second while a table is open)."""
        with self._lock:
            at, got = self._quarantine.get(name, (float("-inf"), {}))
            if self.clock() - at >= STATUS_SECONDS:
                got = recent_quarantine(self.project.quarantine_path(name))
                self._quarantine[name] = (self.clock(), got)
            return got


def pass_rates(quality: dict[str, Any] | None) -> dict[str, float | None]:
    """Per expectation, the share of checked rows that passed over the events kept."""
    totals = (quality or {}).get("totals") or {}
    return {
        name: (t["passed"] / t["checked"] if t.get("checked") else None)
        for name, t in totals.items()
    }


def _table_row(name: str, state: dict[str, Any], st: dict[str, Any]) -> dict[str, Any]:
    record = state.get("record") or {}
    batches = record.get("batches") or []
    lag, behind = st.get("lag"), st.get("versions_behind")
    return {
        "table": name,
        "layer": st.get("layer"),
        "state": state["state"],
        "reason": state.get("reason"),
        "last_batch": batches[-1] if batches else None,
        "batches": batches,
        "last_commit": st.get("last_commit"),
        "version": st.get("version"),
        "rows": st.get("rows"),
        "lag": _lag_text(lag, behind),
        # None before the table's first commit, as `warehouse status` shows `-`.
        "quarantine_rows": (st.get("quarantine_rows") or 0) if st.get("exists") else None,
        "pass_rates": pass_rates(st.get("quality")),
        "dead_letters": dead_letters_progress(st.get("dead_letters")),
    }


def dead_letters_progress(d: dict[str, Any] | None) -> dict[str, Any] | None:
    """A table's dead letters as `warehouse status` gives them (None: the table has no
    dead-letter topic), with how far they are sent in words: `progress` for the table
    of tables, `text` (as `warehouse status` says it) for its details."""
    if d is None:
        return None
    if d["quarantine_version"] is None:
        progress = "none yet"
    elif d["versions_behind"] is None:
        progress = "unknown"
    else:
        progress = versions_behind_text(d["versions_behind"])
    return {**d, "progress": progress, "text": dead_letters_text(d)}


def _lag_text(lag: Any, behind: Any) -> str | None:
    """A Kafka-sourced table's lag in records, a table-sourced one's in versions of its
    input tables (a federated table's total is None while a cluster does not answer)."""
    if isinstance(lag, dict) and lag.get("total") is not None:
        return f"{lag['total']:,} records"
    if isinstance(behind, dict):
        n = behind["total"]
        return f"{n:,} version{'' if n == 1 else 's'}"
    return None


def _run_summary(states: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The processes running tables now (`running`: True), else how the newest run ended."""
    records = [s["record"] for s in states.values() if s.get("record")]
    live = [s["record"] for s in states.values() if s["state"] in RUNNING]
    if live:
        procs = sorted({(r["pid"], r["host"], r["command"], r["started_at"]) for r in live})
        return {
            "running": True,
            "processes": [{"pid": p, "host": h, "command": c, "since": s} for p, h, c, s in procs],
        }
    if not records:
        return {"running": False, "ended": None, "failed": False}
    newest = max(records, key=lambda r: r.get("ended_at") or r.get("heartbeat_at") or "")
    failed = any(s["state"] == "failed" for s in states.values())
    return {
        "running": False,
        "ended": newest.get("ended_at") or newest.get("heartbeat_at"),
        "pid": newest.get("pid"),
        "command": newest.get("command"),
        "failed": failed,
    }
