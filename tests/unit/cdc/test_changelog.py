"""Change feed → changelog records, and the JSON they carry (no broker, no Delta)."""

from __future__ import annotations

import datetime as dt
import decimal
import json

import pyarrow as pa
import pytest

from streams.cdc import PublishError, changelog_records
from streams.cdc.changelog import encode_json


def cdf(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist([{**r, "_commit_timestamp": dt.datetime(2024, 1, 1)} for r in rows])


def rec(r) -> tuple:
    return (r.version, json.loads(r.key), None if r.value is None else json.loads(r.value))


def test_upsert_table_changes_become_values_and_tombstones_in_version_order() -> None:
    changes = cdf(
        [
            {"id": 1, "v": "b", "_change_type": "update_postimage", "_commit_version": 2},
            {"id": 1, "v": "a", "_change_type": "update_preimage", "_commit_version": 2},
            {"id": 1, "v": "a", "_change_type": "insert", "_commit_version": 1},
            {"id": 2, "v": "z", "_change_type": "insert", "_commit_version": 1},
            {"id": 2, "v": "z", "_change_type": "delete", "_commit_version": 3},
        ]
    )
    assert [rec(r) for r in changelog_records(changes, ["id"])] == [
        (1, {"id": 1}, {"id": 1, "v": "a"}),
        (1, {"id": 2}, {"id": 2, "v": "z"}),
        (2, {"id": 1}, {"id": 1, "v": "b"}),
        (3, {"id": 2}, None),
    ]


def test_scd2_table_publishes_the_current_version_and_a_tombstone_when_closed() -> None:
    def row(v, cur, kind, version):
        return {
            "id": 1,
            "v": v,
            "is_current": cur,
            "_change_type": kind,
            "_commit_version": version,
        }

    changes = cdf(
        [
            row("a", True, "insert", 1),
            row("a", True, "update_preimage", 2),
            row("a", False, "update_postimage", 2),
            row("b", False, "insert", 2),  # a version opened and closed within the batch
            row("c", True, "insert", 2),
            row("c", True, "update_preimage", 3),
            row("c", False, "update_postimage", 3),  # closed by a delete, nothing current
        ]
    )
    assert [rec(r) for r in changelog_records(changes, ["id"], mode="scd2")] == [
        (1, {"id": 1}, {"id": 1, "v": "a", "is_current": True}),
        (2, {"id": 1}, {"id": 1, "v": "c", "is_current": True}),
        (3, {"id": 1}, None),
    ]


def test_keys_must_be_columns() -> None:
    changes = cdf([{"id": 1, "_change_type": "insert", "_commit_version": 1}])
    with pytest.raises(PublishError, match="`user_id`"):
        changelog_records(changes, ["user_id"])


def test_json_is_compact_deterministic_and_typed() -> None:
    value = {
        "b": decimal.Decimal("12.30"),
        "a": dt.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=dt.UTC),
        "d": dt.date(2024, 1, 2),
        "raw": b"\x00\x01",
        "n": None,
    }
    assert encode_json(value) == (
        b'{"b":"12.30","a":"2024-01-02T03:04:05.000006+00:00","d":"2024-01-02",'
        b'"raw":"AAE=","n":null}'
    )
    assert encode_json({"k": 1}) == encode_json({"k": 1})
