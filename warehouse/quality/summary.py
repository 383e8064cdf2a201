"""`warehouse status`'s quality lines: per table, its last checked batch and the totals per
expectation of the events kept, read incrementally.

What was summed is kept in `<root>/quality/events-summary.json` (the events table's id,
the data files it read, the sums per table). The next summary reads only the files the
events table added since: appends add files and remove none. A file removed (events
expired by the retention, the table compacted or written again) makes it read the table
whole again, so the totals are always those of the events the table holds.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import streams.storage as storage
from warehouse.spec.paths import events_path, events_summary_path

logger = logging.getLogger(__name__)

_FIELDS = ("expectation", "on_violation", "checked", "passed", "failed")
_COLUMNS = ["table", "batch_id", *_FIELDS, "recorded_at"]


def _empty(table: str) -> dict[str, Any]:
    return {"table": table, "last_batch": None, "totals": {}}


def _load(path: str, table_id: str, files: set[str]) -> tuple[dict[str, Any], set[str]]:
    """The sums kept at `path` and the files they cover, when they are of this events
    table and none of those files is gone; else nothing (read the table whole)."""
    try:
        state = json.loads(storage.read_text(path) or "{}")
    except (OSError, ValueError):
        return {}, set()
    seen = set(state.get("files", []))
    if state.get("table_id") != table_id or not seen <= files:
        logger.info("quality events: files were removed since the last summary; read the "
                    "events table whole")  # fmt: skip
        return {}, set()
    return state.get("tables", {}), seen


def _fold(sums: dict[str, Any], rows: Iterable[dict[str, Any]]) -> None:
    """Add event rows to the per-table sums: totals per expectation, and the batch
    recorded last (batch ids restart with a new checkpoint, so by time, then id)."""
    for r in rows:
        t = sums.setdefault(r["table"], {"last": None, "totals": {}})
        total = t["totals"].setdefault(
            r["expectation"], {"checked": 0, "passed": 0, "failed": 0, "batches": 0}
        )
        for k in ("checked", "passed", "failed"):
            total[k] += r[k]
        total["batches"] += 1
        at = [r["recorded_at"].isoformat(), r["batch_id"]]
        last = t["last"]
        if last is None or at > last["at"]:
            t["last"] = {"at": at, "expectations": [{k: r[k] for k in _FIELDS}]}
        elif at == last["at"]:
            last["expectations"].append({k: r[k] for k in _FIELDS})


def _render(table: str, sums: dict[str, Any] | None) -> dict[str, Any]:
    out = _empty(table)
    if not sums or sums["last"] is None:
        return out
    last = sums["last"]
    out["last_batch"] = {
        "batch_id": last["at"][1],
        "recorded_at": last["at"][0],
        "expectations": sorted(last["expectations"], key=lambda e: e["expectation"]),
    }
    out["totals"] = dict(sorted(sums["totals"].items()))
    return out


def quality_summaries(root: str | Path, tables: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per table of `tables`: `{"table", "last_batch": {"batch_id", "recorded_at",
    "expectations": [{expectation, on_violation, checked, passed, failed}]} | None,
    "totals": {expectation: {"checked", "passed", "failed", "batches"}}}`, reading only
    the events files added since the last summary (see the module's docstring)."""
    from deltalake import DeltaTable

    path = events_path(root)
    options = storage.current().object_store_options(path)
    if not DeltaTable.is_deltatable(path, storage_options=options):
        return {t: _empty(t) for t in tables}
    table = DeltaTable(path, storage_options=options)
    every = list(table.to_pyarrow_dataset().get_fragments())
    files = {f.path for f in every}
    state_path = events_summary_path(root)
    table_id = table.metadata().id
    sums, seen = _load(state_path, table_id, files)
    fragments = [f for f in every if f.path not in seen]
    for fragment in fragments:
        _fold(sums, fragment.to_table(columns=_COLUMNS).to_pylist())
    logger.info("quality events: read %d of %d file(s)", len(fragments), len(files))
    if fragments or seen != files:
        # Unchanged sums are not written again: `warehouse ui` asks every few seconds.
        state = {"table_id": table_id, "files": sorted(files), "tables": sums}
        storage.write_text(state_path, json.dumps(state))
    return {t: _render(t, sums.get(t)) for t in tables}


def recent_quarantine(path: str, *, limit: int = 10) -> dict[str, Any]:
    """The quarantine table at `path`: its rows, and its `limit` newest rows' reasons,
    counted (`{"rows", "reasons": [{"reason", "count", "last_batch", "last_at"}]}`, the
    most frequent first)."""
    from streams.delta import read_table
    from warehouse.spec.paths import table_exists

    if not table_exists(path):
        return {"rows": 0, "reasons": []}
    table = read_table(path, columns=["reason", "batch_id", "quarantined_at"]).to_pylist()
    newest = sorted(table, key=lambda r: (r["quarantined_at"] is not None, r["quarantined_at"]))
    counted: dict[str, dict[str, Any]] = {}
    for r in newest[-limit:]:
        c = counted.setdefault(r["reason"] or "", {"reason": r["reason"] or "", "count": 0})
        c.update(count=c["count"] + 1, last_batch=r["batch_id"], last_at=str(r["quarantined_at"]))
    reasons = sorted(counted.values(), key=lambda c: (-c["count"], c["reason"]))
    return {"rows": len(table), "reasons": reasons}
