"""The quality events Delta table: exactly once per batch, concurrent writers, summary."""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from streams.delta.arrow import read_table
from warehouse.quality.events import quality_summary, write_quality_events
from warehouse.spec.paths import events_path


def metric(table: str, batch_id: int, expectation: str, failed: int) -> dict:
    return {"table": table, "batch_id": batch_id, "expectation": expectation,
            "on_violation": "warn", "checked": 10, "passed": 10 - failed, "failed": failed}  # fmt: skip


def test_a_replayed_batch_adds_nothing(tmp_path):
    m = [metric("t", 3, "e", 1)]
    assert write_quality_events(None, tmp_path, m, app_id="t:q1", batch_id=3) == 0
    assert write_quality_events(None, tmp_path, m, app_id="t:q1", batch_id=2) is None
    assert write_quality_events(None, tmp_path, m, app_id="t:q1", batch_id=3) is None
    # A new checkpoint (new query id) starts its batch ids again.
    assert write_quality_events(None, tmp_path, m, app_id="t:q2", batch_id=3) == 1
    assert read_table(str(events_path(tmp_path))).num_rows == 2
    assert write_quality_events(None, tmp_path, [], app_id="t:q2", batch_id=4) is None


def test_tables_write_their_events_concurrently(tmp_path):
    def run(table: str) -> None:
        for b in range(4):
            write_quality_events(
                None, tmp_path, [metric(table, b, "e1", b), metric(table, b, "e2", 0)],
                app_id=f"{table}:q", batch_id=b,
            )  # fmt: skip

    with ThreadPoolExecutor(3) as pool:
        list(pool.map(run, ["a", "b", "c"]))
    rows = read_table(str(events_path(tmp_path))).to_pylist()
    assert sorted((r["table"], r["batch_id"], r["expectation"]) for r in rows) == sorted(
        (t, b, e) for t in "abc" for b in range(4) for e in ("e1", "e2")
    )


def test_summary_has_the_last_batch_and_totals_per_expectation(tmp_path):
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    for b in range(3):
        write_quality_events(
            None, tmp_path, [metric("ods", b, "nn", b), metric("ods", b, "range", 1)],
            app_id="ods:q", batch_id=b, now=t0.replace(minute=b),
        )  # fmt: skip
    write_quality_events(None, tmp_path, [metric("dwd", 0, "nn", 5)], app_id="dwd:q", batch_id=0,
                         now=t0.replace(minute=9))  # fmt: skip
    assert quality_summary(tmp_path, "ods") == {
        "table": "ods",
        "last_batch": {
            "batch_id": 2,
            "recorded_at": "2026-01-01T00:02:00+00:00",
            "expectations": [
                {"expectation": "nn", "on_violation": "warn", "checked": 10, "passed": 8,
                 "failed": 2},
                {"expectation": "range", "on_violation": "warn", "checked": 10, "passed": 9,
                 "failed": 1},
            ],
        },
        "totals": {
            "nn": {"checked": 30, "passed": 27, "failed": 3, "batches": 3},
            "range": {"checked": 30, "passed": 27, "failed": 3, "batches": 3},
        },
    }  # fmt: skip
    assert quality_summary(tmp_path, "other") == {"table": "other", "last_batch": None,
                                                  "totals": {}}  # fmt: skip
    assert quality_summary(tmp_path / "nowhere", "ods")["last_batch"] is None


def test_appends_see_commits_of_another_writer_and_a_replaced_table(tmp_path):
    from deltalake import CommitProperties, Transaction, write_deltalake

    from warehouse.quality.events import EVENTS_ARROW_SCHEMA, _rows

    m = [metric("t", 3, "e", 1)]
    assert write_quality_events(None, tmp_path, m, app_id="t:q1", batch_id=3) == 0
    # Another process records batch 5 of the same query: this one skips it.
    other = pa.Table.from_pylist(
        _rows([metric("t", 5, "e", 0)], datetime.now(UTC)), EVENTS_ARROW_SCHEMA
    )
    write_deltalake(
        str(events_path(tmp_path)), other, mode="append",
        commit_properties=CommitProperties(app_transactions=[Transaction("t:q1", 5)]),
    )  # fmt: skip
    assert write_quality_events(None, tmp_path, m, app_id="t:q1", batch_id=5) is None
    assert write_quality_events(None, tmp_path, m, app_id="t:q1", batch_id=6) == 2
    # The table removed and written again starts at version 0, not after the old one.
    shutil.rmtree(events_path(tmp_path))  # a path under a local root
    assert write_quality_events(None, tmp_path, m, app_id="t:q1", batch_id=7) == 0
    assert write_quality_events(None, tmp_path, m, app_id="t:q1", batch_id=8) == 1
    assert read_table(str(events_path(tmp_path))).num_rows == 2


def test_events_older_than_the_retention_are_deleted(tmp_path):
    """`quality.events_retention`: a write deletes the events recorded longer ago than
    the retention (at most once an hour of the writers' clock); a replayed batch of
    theirs is still skipped, by the app transaction that outlives its rows."""
    from datetime import timedelta

    old = datetime(2026, 1, 1, tzinfo=UTC)
    month = 30 * 86400.0
    for b in range(3):
        write_quality_events(
            None, tmp_path, [metric("t", b, "e", 0)], app_id="t:q", batch_id=b,
            now=old + timedelta(minutes=b), retention=month,
        )  # fmt: skip
    later = old + timedelta(days=31)
    write_quality_events(
        None, tmp_path, [metric("t", 3, "e", 0)], app_id="t:q", batch_id=3, now=later,
        retention=month,
    )  # fmt: skip
    rows = read_table(str(events_path(tmp_path))).to_pylist()
    assert [(r["batch_id"], r["recorded_at"]) for r in rows] == [(3, later)]
    assert write_quality_events(
        None, tmp_path, [metric("t", 1, "e", 0)], app_id="t:q", batch_id=1, now=later,
        retention=month,
    ) is None  # fmt: skip


def test_status_reads_only_the_events_written_since_it_last_read(tmp_path, caplog):
    """`quality_summaries` keeps what it summed (`<root>/quality/events-summary.json`)
    and reads only the files added since (and with none, writes nothing); a file removed (events expired) makes it read
    the table again. Either way the summary is the one a whole read gives."""
    import logging

    from warehouse.quality.summary import quality_summaries
    from warehouse.spec.paths import events_summary_path

    t0 = datetime(2026, 1, 1, tzinfo=UTC)

    def write(table: str, b: int, failed: int, minute: int) -> None:
        write_quality_events(
            None, tmp_path, [metric(table, b, "nn", failed)], app_id=f"{table}:q",
            batch_id=b, now=t0.replace(minute=minute),
        )  # fmt: skip

    summary = Path(events_summary_path(tmp_path))  # a location string; here a local one

    def whole() -> dict:
        shutil.copy(summary, tmp_path / "kept.json")
        summary.unlink()
        out = quality_summaries(tmp_path, ["ods", "dwd"])
        shutil.copy(tmp_path / "kept.json", summary)
        return out

    for b in range(3):
        write("ods", b, b, b)
    caplog.set_level(logging.INFO, logger="warehouse.quality.summary")
    first = quality_summaries(tmp_path, ["ods", "dwd"])
    assert first["ods"]["totals"]["nn"] == {"checked": 30, "passed": 27, "failed": 3, "batches": 3}
    assert "read 3 of 3 file(s)" in caplog.text
    write("dwd", 0, 5, 9)
    caplog.clear()
    second = quality_summaries(tmp_path, ["ods", "dwd"])
    assert "read 1 of 4 file(s)" in caplog.text
    assert second == whole()
    assert second["dwd"]["last_batch"]["batch_id"] == 0
    # nothing new: the same summary, and the kept file is not written again
    kept = summary.stat().st_mtime_ns, summary.read_bytes()
    caplog.clear()
    assert quality_summaries(tmp_path, ["ods", "dwd"]) == second
    assert "read 0 of 4 file(s)" in caplog.text
    assert (summary.stat().st_mtime_ns, summary.read_bytes()) == kept

    # events expired: a file removed, the table read whole again
    from datetime import timedelta

    write_quality_events(
        None, tmp_path, [metric("ods", 3, "nn", 0)], app_id="ods:q", batch_id=3,
        now=t0 + timedelta(minutes=5), retention=200.0,
    )  # fmt: skip
    caplog.clear()
    third = quality_summaries(tmp_path, ["ods", "dwd"])
    assert "read the events table whole" in caplog.text
    assert third == whole()
    assert third["ods"]["totals"]["nn"]["batches"] == 2  # batches 2 and 3
