"""Delta tables for the publish tests, written with delta-rs (merges give a real change feed)."""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Iterable

import pyarrow as pa
from deltalake import DeltaTable, Schema

from streams.delta.tables import open_table, storage_options

SCHEMA = pa.schema(
    [
        ("user_id", pa.int64()),
        ("name", pa.string()),
        ("amount", pa.decimal128(12, 2)),
        ("updated", pa.timestamp("us", tz="UTC")),
    ]
)
KEYS = ["user_id"]


def create(path: str) -> None:
    DeltaTable.create(
        path,
        Schema.from_arrow(SCHEMA),
        configuration={"delta.enableChangeDataFeed": "true"},
        storage_options=storage_options(path),
    )


def row(user_id: int, name: str, cents: int) -> dict:
    return {
        "user_id": user_id,
        "name": name,
        "amount": decimal.Decimal(cents) / 100,
        "updated": dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=cents),
    }


def upsert(path: str, rows: Iterable[dict]) -> int:
    data = pa.Table.from_pylist(list(rows), schema=SCHEMA)
    (
        open_table(path)
        .merge(data, "t.user_id = s.user_id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    return open_table(path).version()


def delete(path: str, ids: Iterable[int]) -> int:
    open_table(path).delete("user_id IN (" + ", ".join(str(int(i)) for i in ids) + ")")
    return open_table(path).version()
