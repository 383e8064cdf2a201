"""A quarantine table's rows as dead letters (no broker: rows that did not parse keep
their bytes in the quarantine table), and the headers they carry."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from streams.cdc.deadletter import DeadLetters, _runs
from streams.delta import arrow_schema
from warehouse.quality.quarantine import QUARANTINE_SCHEMA

AT = dt.datetime(2026, 12, 2, tzinfo=dt.UTC)


def _rows(offsets: list[int], *, key: bytes | None) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "reason": f"parse error: bad {o}",
                "failed_expectations": [],
                "batch_id": 0,
                "source_topic": "orders",
                "source_partition": 1,
                "source_offset": o,
                "source_timestamp": AT,
                "raw_key": key,
                "raw_value": f"not json {o}".encode(),
                "row": None,
                "quarantined_at": AT,
            }
            for o in offsets
        ],
        schema=arrow_schema(QUARANTINE_SCHEMA),
    )


def test_parse_errors_become_their_original_records_with_connect_headers(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "q")
    config = {"delta.enableChangeDataFeed": "true"}
    write_deltalake(path, _rows([9, 4], key=b"k"), configuration=config)
    write_deltalake(path, _rows([2], key=None), mode="append")
    feed = DeadLetters(path, "ods_orders", "dlq.orders", "127.0.0.1:1")  # never asked

    letters = feed.read(DeltaTable(path), 0, 1)

    # in version order, then by source coordinates (the order a position counts)
    assert [(r.version, r.key, r.value) for r in letters] == [
        (0, b"k", b"not json 4"),
        (0, b"k", b"not json 9"),
        (1, None, b"not json 2"),
    ]
    assert dict(letters[0].headers) == {
        "__connect.errors.topic": b"orders",
        "__connect.errors.partition": b"1",
        "__connect.errors.offset": b"4",
        "__connect.errors.connector.name": b"ods_orders",
        "__connect.errors.stage": b"PARSE",
        "__connect.errors.exception.message": b"parse error: bad 4",
    }
    assert [r.version for r in feed.read(DeltaTable(path), 1, 1)] == [1]


def test_offsets_far_apart_are_read_from_positions_of_their_own() -> None:
    assert _runs([1, 2, 900, 5000, 5001]) == [[1, 2, 900], [5000, 5001]]
