"""A change feed slice as the records of a compacted topic: one per key and version,
keyed by the JSON of the sink keys, valued by the JSON of the row's post-image, a
delete as a tombstone (no value). `publish_changes` produces them.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa

from streams.cdc.errors import PublishError

CDF_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")

PublishMode = Literal["upsert", "scd2"]


@dataclass(frozen=True)
class ChangeRecord:
    """One record to publish: of Delta `version`, with headers of its own besides the
    publisher's (`streams.cdc.produce`). A changelog record always has a key; a dead
    letter (`streams.cdc.deadletter`) has its original record's, which may be null."""

    version: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()


def _json_default(value: Any) -> Any:
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)  # exact; Spark's from_json reads decimals from strings
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"value of type {type(value).__name__} is not JSON serializable")


def encode_json(obj: Mapping[str, Any]) -> bytes:
    """Compact, deterministic JSON (equal keys give equal bytes, as compaction needs)."""
    return json.dumps(obj, default=_json_default, separators=(",", ":")).encode("utf-8")


def changelog_records(
    changes: pa.Table, keys: Sequence[str], *, mode: PublishMode = "upsert"
) -> list[ChangeRecord]:
    """The records of a change feed slice, in version order: one per key and version."""
    missing = [
        k for k in (*keys, "_change_type", "_commit_version") if k not in changes.schema.names
    ]
    if missing:
        raise PublishError(
            f"change feed lacks the column(s) {', '.join(f'`{c}`' for c in missing)}; the "
            f"published keys must be columns of the table (have: {', '.join(changes.schema.names)})"
        )
    data_columns = [c for c in changes.schema.names if c not in CDF_COLUMNS]
    by_version: dict[int, dict[tuple[Any, ...], list[dict[str, Any]]]] = {}
    for row in changes.to_pylist():
        kind = row["_change_type"]
        if kind == "update_preimage":
            continue
        key = tuple(row[k] for k in keys)
        by_version.setdefault(row["_commit_version"], {}).setdefault(key, []).append(row)
    records: list[ChangeRecord] = []
    for version in sorted(by_version):
        for key, rows in by_version[version].items():
            images = [r for r in rows if r["_change_type"] in ("insert", "update_postimage")]
            if mode == "scd2":
                images = [r for r in images if r.get("is_current")]
            key_bytes = encode_json(dict(zip(keys, key, strict=True)))
            if images:
                value = encode_json({c: images[-1][c] for c in data_columns})
                records.append(ChangeRecord(version, key_bytes, value))
            else:
                records.append(ChangeRecord(version, key_bytes, None))
    return records
