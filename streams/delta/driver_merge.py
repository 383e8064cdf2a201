"""A small upsert merged on the driver and committed through delta-spark's transaction.

delta-spark's MERGE of a few rows into a small table costs about 1.2 s of JVM CPU on a
warm JVM in 12-13 Spark jobs, most of it rebuilding the state of the table's version
for its scan and planning the MERGE's two passes. The same upsert computed in Arrow on
the driver (the table's files that hold a key of the batch read whole, the rows the
batch replaces left out, one new file and one change-feed file written) and committed
through `DeltaLog.startTransaction()` costs 0.4-0.5 of it, the batch's dedupe and
collection included (docs/decisions/0013; docs/benchmarks.md, "Native engine: a small MERGE"): delta-spark
still checks conflicts (`readWholeTable`), the protocol and the app transaction, writes
the log and its checksum.

Only for what this module writes exactly as delta-spark's MERGE would: an unpartitioned
table on the local file system, of the batch's own columns and types, without table
features beyond the change feed, and a `sequence_by` column, if any, that is not a
floating-point one (Spark orders NaN above every number; Python does not); anything
else keeps delta-spark's MERGE (`mergeable`). With `sequence_by`, a change replaces or
deletes its key's row only when it is not older (the sink's MERGE condition), and the
batch reaches this module with the changes older than their key's tombstone dropped.
Delta's MERGE operation is recorded, so the history reads the same.

An SCD2 batch goes the same way (`scd2_on_driver`): its plan (`scd2.plan_batch`, the
same on both engines) closes current rows and inserts versions; the files holding a
current row it closes are rewritten with that row's `valid_to` and `is_current` set,
and the inserts are added, as the sink's MERGE of the plan does.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql.types import DoubleType, FloatType, StructType

from streams.delta._confs import session_confs
from streams.delta.adds import add_actions
from streams.delta.commit import already_committed
from streams.delta.files import CODEC, ZSTD_LEVEL, _Stats
from streams.delta.scd2 import ACTION
from streams.delta.scd2_plan import IS_CURRENT, VALID_TO
from streams.delta.sink import DELETE_FLAG
from streams.delta.tables import open_table
from streams.delta.target import DeltaTarget

logger = logging.getLogger(__name__)

_FEATURE_KEYS = (
    "delta.constraints.",
    "delta.columnMapping.mode",
    "delta.enableDeletionVectors",
    "delta.enableRowTracking",
    "delta.appendOnly",
    "delta.enableTypeWidening",
    "delta.checkpointPolicy",
)
"""Table properties of features this module does not write; a table with any of them
keeps delta-spark's MERGE."""

_CDF = "delta.enableChangeDataFeed"

_WRITER_FEATURES = {"changeDataFeed", "invariants", "appendOnly"}
"""The writer features of a table delta-spark creates with the change feed on (the
legacy ones it lists); `invariants` and `appendOnly` are then checked per column and
per property."""


def local_path(path: str) -> str | None:
    """The local file system path of a table location, or None for any other scheme."""
    parsed = urlparse(path)
    if parsed.scheme in ("", "file"):
        return unquote(parsed.path) if parsed.scheme else path
    return None


def mergeable(
    table: Any, target: DeltaTarget, schema: StructType, *, drop: str = DELETE_FLAG
) -> bool:
    """Whether a batch of `schema` can be merged on the driver into the delta-rs `table`:
    an upsert's changes (with the delete flag, `drop`), or an SCD2 batch's MERGE source
    (with its action column)."""
    if table is None or target.partition_by:
        return False
    if (
        target.mode == "upsert"
        and target.sequence_by
        and isinstance(schema[target.sequence_by].dataType, FloatType | DoubleType)
    ):
        return False
    if local_path(target.path) is None:
        return False
    protocol = table.protocol()
    if protocol.min_reader_version > 1 or protocol.min_writer_version > 7:
        return False
    if not set(protocol.writer_features or ()) <= _WRITER_FEATURES:
        return False
    meta = table.metadata()
    if meta.partition_columns:
        return False
    if any(k.startswith(_FEATURE_KEYS) for k in meta.configuration):
        return False
    columns = _columns(json.loads(table.schema().to_json()))
    return columns is not None and columns == _columns(schema.jsonValue(), drop=drop)


def _columns(schema: dict[str, Any], *, drop: str | None = None) -> list[tuple[str, str]] | None:
    """(name, type) of each column; None when a column carries metadata of a feature
    (generated, identity, default values)."""
    out = []
    for f in schema.get("fields", []):
        if f["name"] == drop:
            continue
        if any(k.startswith("delta.") for k in (f.get("metadata") or {})):
            return None
        out.append((f["name"], json.dumps(f["type"], sort_keys=True)))
    return out


def _scala_object(jvm: Any, name: str) -> Any:
    """The instance of the Scala `object` whose class is `name` (its `MODULE$`)."""
    loader = jvm.Thread.currentThread().getContextClassLoader()
    return jvm.java.lang.Class.forName(name, True, loader).getField("MODULE$").get(None)


def _operation(jvm: Any) -> Any:
    """Delta's MERGE operation (no predicates recorded)."""
    nil = _scala_object(jvm, "scala.collection.immutable.Nil$")
    none = _scala_object(jvm, "scala.None$")
    merge = _scala_object(jvm, "org.apache.spark.sql.delta.DeltaOperations$Merge$")
    return merge.apply(none, nil, nil, nil)


def _newer(change: Any, row: Any) -> bool:
    """Whether a change of sequence value `change` replaces a row of `row`: the sink's
    MERGE condition `t.seq IS NULL OR s.seq >= t.seq`."""
    return row is None or (change is not None and change >= row)


def _keys(t: pa.Table, keys: list[str]) -> list[tuple[Any, ...]]:
    return list(zip(*(t.column(k).to_pylist() for k in keys), strict=True))


def _write(root: str, rel: str, t: pa.Table) -> int:
    """Write `t` as one Parquet file at `rel` under `root`, compressed as every file the
    framework writes; its size."""
    full = os.path.join(root, rel)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    pq.write_table(t, full, compression=CODEC, compression_level=ZSTD_LEVEL)
    return os.path.getsize(full)


def _stats(t: pa.Table) -> str:
    """The add action's statistics of `t` (numRecords, min/max, nullCount), by the rules
    of the framework's other writers, so that readers can skip the file by them."""
    stats = _Stats(t.schema)
    for batch in t.to_batches():
        stats.update(batch)
    return stats.to_json()


def _merged(root: str, table: Any, few: pa.Table, target: DeltaTarget) -> list[dict[str, Any]]:
    """The remove, add and cdc actions of the upsert of `few` into the delta-rs `table`
    (at the transaction's version), their files written under `root`."""
    cdf = table.metadata().configuration.get(_CDF, "false").lower() == "true"
    columns = [c for c in few.column_names if c != DELETE_FLAG]
    deletes = few.column(DELETE_FLAG).to_pylist()
    src = few.select(columns)
    by_key = {k: i for i, k in enumerate(_keys(src, target.keys))}
    seq = target.sequence_by
    src_seq = src.column(seq).to_pylist() if seq else None
    # matched: changes whose key has a row (never inserted); applied: those of them
    # that replace or delete it (all of them without `sequence_by`)
    matched: set[int] = set()
    applied: set[int] = set()
    removed, kept, pre_update, pre_delete = [], [], [], []
    for path, size, rows in _table_files(root, table, src.schema):
        hits = [by_key.get(k) for k in _keys(rows, target.keys)]
        matched.update(h for h in hits if h is not None)
        if src_seq is not None:
            row_seq = rows.column(seq).to_pylist()
            hits = [
                h if h is not None and _newer(src_seq[h], row_seq[j]) else None
                for j, h in enumerate(hits)
            ]
        if all(h is None for h in hits):
            continue
        removed.append((path, size))
        keep = pa.array([h is None for h in hits])
        kept.append(rows.filter(keep))
        upd = pa.array([h is not None and not deletes[h] for h in hits])
        dele = pa.array([h is not None and deletes[h] for h in hits])
        pre_update.append(rows.filter(upd))
        pre_delete.append(rows.filter(dele))
        applied.update(h for h in hits if h is not None)
    idx = list(range(src.num_rows))
    updates = src.take(pa.array([i for i in idx if i in applied and not deletes[i]], pa.int64()))
    inserts = src.take(
        pa.array([i for i in idx if i not in matched and not deletes[i]], pa.int64())
    )
    return _file_actions(
        root,
        removed,
        pa.concat_tables([*kept, updates, inserts]),
        [
            (_concat(pre_update), "update_preimage"),
            (updates, "update_postimage"),
            (_concat(pre_delete), "delete"),
            (inserts, "insert"),
        ],
        cdf=cdf,
    )


def _table_files(root: str, table: Any, schema: pa.Schema) -> Iterator[tuple[str, int, pa.Table]]:
    """(path, size, rows) of each live file of the delta-rs `table`, its rows read in
    `schema`'s columns and types: a timestamp delta-spark wrote as INT96 reads back
    without a time zone, and a key of it would never equal the batch's."""
    adds = add_actions(table).to_pydict()
    for path, size in zip(adds["path"], adds["size_bytes"], strict=True):
        rows = pq.read_table(os.path.join(root, unquote(path)), columns=schema.names)
        yield path, size, rows.select(schema.names).cast(schema)


def _concat(tables: list[pa.Table]) -> pa.Table | None:
    return pa.concat_tables(tables) if tables else None


def _file_actions(
    root: str,
    removed: list[tuple[str, int]],
    new: pa.Table,
    changes: list[tuple[pa.Table | None, str]],
    *,
    cdf: bool,
) -> list[dict[str, Any]]:
    """The remove actions of the files `removed` (path, size), the add action of `new`
    written as one file (when it has rows), and, when the table keeps a change feed, the
    cdc action of one file of `changes` (rows, `_change_type`) that have rows."""
    now = int(time.time() * 1000)
    actions: list[dict[str, Any]] = [
        {
            "remove": {
                "path": path,
                "deletionTimestamp": now,
                "dataChange": True,
                "extendedFileMetadata": True,
                "partitionValues": {},
                "size": size,
            }
        }
        for path, size in removed
    ]
    if new.num_rows:
        name = f"part-00000-{uuid.uuid4()}-c000.zstd.parquet"
        size = _write(root, name, new)
        actions.append(
            {
                "add": {
                    "path": name,
                    "partitionValues": {},
                    "size": size,
                    "modificationTime": now,
                    "dataChange": True,
                    "stats": _stats(new),
                }
            }
        )
    parts = [
        rows.append_column("_change_type", pa.array([kind] * rows.num_rows, pa.string()))
        for rows, kind in changes
        if rows is not None and rows.num_rows
    ]
    if cdf and parts:
        name = f"_change_data/cdc-00000-{uuid.uuid4()}.zstd.parquet"
        size = _write(root, name, pa.concat_tables(parts))
        actions.append(
            {"cdc": {"path": name, "partitionValues": {}, "size": size, "dataChange": False}}
        )
    return actions


def _closed(root: str, table: Any, source: pa.Table, target: DeltaTarget) -> list[dict[str, Any]]:
    """The remove, add and cdc actions of an SCD2 batch's MERGE source `source`
    (`streams.delta.scd2.plan_batch`) applied to the delta-rs `table`, their files
    written under `root`: a `close` row ends its key's current row (`valid_to` from the
    row, `is_current` false) and an `insert` row is a new version, as the sink's MERGE
    (`t.key = s.key AND s.action = 'close' AND t.is_current`) does."""
    cdf = table.metadata().configuration.get(_CDF, "false").lower() == "true"
    columns = [c for c in source.column_names if c != ACTION]
    src = source.select(columns)
    kinds = source.column(ACTION).to_pylist()
    ends = src.column(VALID_TO)
    closes = {k: i for i, k in enumerate(_keys(src, target.keys)) if kinds[i] == "close"}
    inserts = src.filter(pa.array([k == "insert" for k in kinds]))
    removed, kept, before, after = [], [], [], []
    for path, size, rows in _table_files(root, table, src.schema):
        current = rows.column(IS_CURRENT).to_pylist()
        hits = [
            closes.get(k) if current[j] else None for j, k in enumerate(_keys(rows, target.keys))
        ]
        if all(h is None for h in hits):
            continue
        removed.append((path, size))
        kept.append(rows.filter(pa.array([h is None for h in hits])))
        ended = rows.filter(pa.array([h is not None for h in hits]))
        n = ended.num_rows
        closed = ended.set_column(
            columns.index(VALID_TO), VALID_TO, ends.take([h for h in hits if h is not None])
        ).set_column(columns.index(IS_CURRENT), IS_CURRENT, pa.array([False] * n, pa.bool_()))
        before.append(ended)
        after.append(closed)
    return _file_actions(
        root,
        removed,
        pa.concat_tables([*kept, *after, inserts]),
        [
            (_concat(before), "update_preimage"),
            (_concat(after), "update_postimage"),
            (inserts, "insert"),
        ],
        cdf=cdf,
    )


def merge_on_driver(
    spark: SparkSession,
    few: pa.Table,
    target: DeltaTarget,
    batch_id: int,
    user_meta: str,
    *,
    table: Any = None,
) -> bool | None:
    """Upsert the deduped changes `few` (one row per key, with the delete flag) into the
    table, committed with the writer's app transaction and `user_meta`. True when
    committed; False when the transaction's version shows the batch is in already
    (nothing written); None when the rows could not be merged in Arrow (logged; nothing
    committed), for the caller to run delta-spark's MERGE instead. `table`: the caller's
    delta-rs table (`kept_table`), read when it is at the transaction's version; else
    the table is opened at that version (a full read of its log)."""

    txn = _transaction(spark, target)
    version = txn.snapshot().version()
    if table is None or table.version() != version:
        table = open_table(target.path, version=version)
    if already_committed(table, target, batch_id):
        return False
    return _apply(
        spark, txn, lambda root: _merged(root, table, few, target), target, batch_id, user_meta
    )


def scd2_on_driver(
    spark: SparkSession,
    table: Any,
    source: pa.Table,
    target: DeltaTarget,
    batch_id: int,
    user_meta: str,
) -> bool | None:
    """Apply an SCD2 batch's MERGE source `source`, planned against the delta-rs `table`,
    committed with the writer's app transaction and `user_meta`. True when committed;
    False when the batch is in already; None when the table has moved on since the plan
    or the rows could not be merged in Arrow (nothing committed), for the caller to run
    delta-spark's MERGE instead."""
    txn = _transaction(spark, target)
    if txn.snapshot().version() != table.version():
        return None
    if already_committed(table, target, batch_id):
        return False
    return _apply(
        spark, txn, lambda root: _closed(root, table, source, target), target, batch_id, user_meta
    )


def _transaction(spark: SparkSession, target: DeltaTarget) -> Any:
    """delta-spark's transaction on the table, reading all of it: a writer that commits
    first conflicts with it."""
    jvm = spark._jvm
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, target.path)
    txn = log.startTransaction()
    txn.readWholeTable()
    return txn


def _apply(
    spark: SparkSession,
    txn: Any,
    actions_of: Callable[[str], list[dict[str, Any]]],
    target: DeltaTarget,
    batch_id: int,
    user_meta: str,
) -> bool | None:
    """Commit through `txn` the actions `actions_of(root)` writes, with the writer's app
    transaction and `user_meta`; None (logged) when Arrow could not compute them."""
    root = local_path(target.path)
    assert root is not None
    try:
        actions = actions_of(root)
    except (pa.ArrowException, OSError, ValueError, TypeError) as e:
        logger.warning(
            "Delta table %s: batch %d could not be merged on the driver (%s); "
            "merging it with delta-spark",
            target.name,
            batch_id,
            e,
        )
        return None
    now = int(time.time() * 1000)
    actions.append({"txn": {"appId": target.app_id, "version": int(batch_id), "lastUpdated": now}})
    jvm = spark._jvm
    action = _scala_object(jvm, "org.apache.spark.sql.delta.actions.Action$")
    listed = jvm.java.util.ArrayList()
    for a in actions:
        listed.add(action.fromJson(json.dumps(a)))
    # Delta's MERGE operation reads its metrics (rows of the source, ...) at commit from
    # the SQL metrics its command registers; there is no command here, so none.
    confs = {
        "spark.databricks.delta.commitInfo.userMetadata": user_meta,
        "spark.databricks.delta.history.metricsEnabled": "false",
    }
    with session_confs(spark, confs):
        txn.commit(
            jvm.scala.jdk.javaapi.CollectionConverters.asScala(listed).toSeq(), _operation(jvm)
        )
    return True
