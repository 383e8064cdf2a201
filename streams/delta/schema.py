"""Table schemas from Spark schemas, and the evolution rules for incoming batches.

Rules: every column of a table is nullable (batches from different sources disagree
on nullability and Delta would refuse the later ones); new top-level columns are
added; a column whose type changed is an error, because rewriting the table
is a decision for a person (`warehouse reset`), not for a streaming sink.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pyarrow as pa
from deltalake import DeltaTable, Field, Schema
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from streams.delta.errors import DeltaSchemaError


def _normalize(t: pa.DataType) -> pa.DataType:
    if pa.types.is_timestamp(t) and t.tz is not None:
        return pa.timestamp("us", tz="UTC")
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_normalize(f.type)).with_nullable(True) for f in t])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(t.value_field.with_type(_normalize(t.value_type)).with_nullable(True))
    if pa.types.is_map(t):
        return pa.map_(_normalize(t.key_type), _normalize(t.item_type))
    return t


def arrow_schema(spark_schema: StructType, *, drop: Sequence[str] = ()) -> pa.Schema:
    """The Arrow schema a table stores for batches of `spark_schema` (UTC, all nullable)."""
    schema = to_arrow_schema(spark_schema, timezone="UTC")
    return pa.schema(
        [pa.field(f.name, _normalize(f.type), nullable=True) for f in schema if f.name not in drop]
    )


def normalize_arrow(schema: pa.Schema) -> pa.Schema:
    return pa.schema([pa.field(f.name, _normalize(f.type), nullable=True) for f in schema])


def _type_json(field: Field) -> object:
    return json.loads(field.to_json())["type"]


def new_columns(table: DeltaTable, incoming: pa.Schema, *, path: str) -> list[Field]:
    """Columns of `incoming` the table lacks; raises on a column whose type changed."""
    current = {f.name: f for f in table.schema().fields}
    lowered = {name.lower(): name for name in current}
    added: list[Field] = []
    for field in Schema.from_arrow(incoming).fields:
        existing = current.get(field.name)
        if existing is None and field.name.lower() in lowered:
            raise DeltaSchemaError(
                f"Delta table `{path}`: column `{field.name}` differs only in case from the "
                f"table's column `{lowered[field.name.lower()]}`; Delta column names are case "
                "insensitive. Rename the column in the query.",
                path=path,
                column=field.name,
            )
        if existing is None:
            added.append(Field(field.name, field.type, nullable=True))
        elif _type_json(existing) != _type_json(field):
            raise _type_changed(path, existing, field)
    return added


def _shape(type_json: object) -> object:
    """A Delta type's JSON without its nullability flags and metadata (which delta-spark
    and delta-rs record differently for nested types)."""
    if isinstance(type_json, dict):
        return {
            k: _shape(v)
            for k, v in type_json.items()
            if k not in ("nullable", "containsNull", "valueContainsNull", "metadata")
        }
    if isinstance(type_json, list):
        return [_shape(v) for v in type_json]
    return type_json


def check_types(table: DeltaTable, incoming: pa.Schema, *, path: str) -> None:
    """Raise `DeltaSchemaError` for a column of `incoming` whose type is not the table's,
    nullability aside; columns only one side has are not compared. The native engine's
    check: delta-spark refuses such an append with "Failed to merge fields 'x' and 'x'",
    and its MERGE casts the new type to the old one, failing on a value that does not
    cast."""
    current = {f.name: f for f in table.schema().fields}
    for field in Schema.from_arrow(incoming).fields:
        existing = current.get(field.name)
        if existing is not None and _shape(_type_json(existing)) != _shape(_type_json(field)):
            raise _type_changed(path, existing, field)


def type_text(field: Field) -> str:
    """A column's Delta type as a user reads it: `decimal(12,2)`, or the JSON of a
    nested type."""
    t = _type_json(field)
    return t if isinstance(t, str) else json.dumps(t)


def _type_changed(path: str, existing: Field, field: Field) -> DeltaSchemaError:
    was, now = type_text(existing), type_text(field)
    return DeltaSchemaError(
        f"Delta table `{path}`: column `{field.name}` has type `{was}` in the table but "
        f"`{now}` in the batch. A sink does not change column types: cast the column "
        "back in the query, or reset the table (drop table and checkpoint) to rebuild it "
        "with the new type.",
        path=path,
        column=field.name,
        types=(was, now),
    )


def check_partitioning(table: DeltaTable, partition_by: Sequence[str], *, path: str) -> None:
    existing = list(table.metadata().partition_columns)
    if partition_by and existing != list(partition_by):
        raise DeltaSchemaError(
            f"Delta table `{path}` is partitioned by `{existing}` but the sink asks for "
            f"`{list(partition_by)}`. Partitioning is fixed when a table is created: "
            "restore `partition_by`, or reset the table to repartition it.",
            path=path,
            partitioning=(existing, list(partition_by)),
        )


def check_columns(columns: Sequence[str], needed: Sequence[str], *, path: str, what: str) -> None:
    missing = [c for c in needed if c not in columns]
    if missing:
        raise DeltaSchemaError(
            f"Delta table `{path}`: {what} "
            + ", ".join(f"`{c}`" for c in missing)
            + " not in the batch's columns ("
            + ", ".join(f"`{c}`" for c in columns)
            + "). Add them to the query's output or change the sink.",
            path=path,
            column=missing[0],
        )
