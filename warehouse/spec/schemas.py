"""Column lists without Spark: payload schemas (`schemas/NAME.json|.ddl`) and table outputs.

A payload schema is either a JSON Schema (object, properties, types, `required`)
or a Spark DDL string. Both become a list of `Column(name, type, nullable)` with
Spark SQL type strings (`string`, `bigint`, `decimal(12,2)`, `array<string>`, ...),
and `to_ddl()` turns a list back into a DDL string that Spark's `from_json` takes.

The per-table helpers below add what the framework itself puts next to the
payload (Kafka coordinates, CDC markers, change-feed and SCD2 columns); the
contract for those names is in the README ("A tour") and docs/architecture.md.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from warehouse.errors import WarehouseError


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    nullable: bool = True

    def ddl(self, *, not_null: bool = False) -> str:
        return f"`{self.name}` {self.type}" + (
            " NOT NULL" if not_null and not self.nullable else ""
        )


class Columns(list[Column]):
    """The output columns of a table. `opaque` means some columns are not known at load
    time (a Python transform, a payload without schema): checks downstream are skipped."""

    def __init__(self, columns: Iterable[Column] = (), *, opaque: bool = False) -> None:
        super().__init__(columns)
        self.opaque = opaque

    @property
    def names(self) -> list[str]:
        return [c.name for c in self]

    def get(self, name: str) -> Column | None:
        low = name.lower()
        return next((c for c in self if c.name.lower() == low), None)

    def has(self, name: str) -> bool:
        return self.get(name) is not None

    def to_ddl(self, *, not_null: bool = False) -> str:
        return to_ddl(self, not_null=not_null)

    def __repr__(self) -> str:
        return f"Columns({list.__repr__(self)}, opaque={self.opaque})"


class SchemaFileError(WarehouseError):
    """A payload schema file that cannot be turned into columns; `field` locates the problem."""

    def __init__(self, message: str, *, field: str = "") -> None:
        super().__init__(message)
        self.field = field


def to_ddl(columns: Iterable[Column], *, not_null: bool = False) -> str:
    """`"`a` string, `b` bigint"` — what `StructType.fromDDL` / `from_json` accept."""
    return ", ".join(c.ddl(not_null=not_null) for c in columns)


# --- JSON Schema -------------------------------------------------------------------

_JSON_SCALARS = {"string": "string", "integer": "bigint", "number": "double", "boolean": "boolean"}


def json_schema_columns(document: Any) -> Columns:
    """JSON Schema → columns. The top level must be an object with `properties`.

    `x-spark-type` on a property overrides the mapping (e.g. `decimal(12,2)`).
    """
    if not isinstance(document, dict):
        raise SchemaFileError('a JSON Schema must be an object (`{"type": "object", ...}`)')
    if document.get("type", "object") != "object":
        raise SchemaFileError(
            f"the top-level `type` is `{document.get('type')}`; a payload schema must be "
            "`object` with `properties`",
            field="type",
        )
    props = document.get("properties")
    if not isinstance(props, dict) or not props:
        raise SchemaFileError(
            "a payload schema needs `properties`: an object mapping column names to types",
            field="properties",
        )
    required = _required(document, "")
    return Columns(
        Column(
            name,
            _json_type(spec, f"properties.{name}", document),
            nullable=name not in required or _allows_null(_resolve(spec, document, name)),
        )
        for name, spec in props.items()
    )


def _required(document: dict[str, Any], where: str) -> set[str]:
    req = document.get("required", [])
    if not isinstance(req, list) or not all(isinstance(r, str) for r in req):
        raise SchemaFileError(
            "`required` must be a list of property names", field=f"{where}required".lstrip(".")
        )
    return set(req)


def _allows_null(spec: Any) -> bool:
    if not isinstance(spec, dict):
        return False
    kind = spec.get("type")
    return (isinstance(kind, list) and "null" in kind) or spec.get("nullable") is True


_FORMATS = {
    ("string", "date-time"): "timestamp",
    ("string", "date"): "date",
    ("integer", "int32"): "int",
    ("integer", "int64"): "bigint",
    ("number", "float"): "float",
    ("number", "double"): "double",
}


def _referenced(ref: str, root: dict[str, Any], where: str) -> Any:
    """What the local `$ref` `ref` points at in the document `root`."""
    if not ref.startswith("#/"):
        raise SchemaFileError(f"`$ref` `{ref}` is not local; only `#/...` refs", field=where)
    target: Any = root
    for part in ref[2:].split("/"):
        if not isinstance(target, dict) or part not in target:
            raise SchemaFileError(f"`$ref` `{ref}` points nowhere", field=f"{where}.$ref")
        target = target[part]
    return target


def _resolve(spec: Any, root: dict[str, Any], where: str, depth: int = 0) -> Any:
    """Follow a local `$ref` (`#/definitions/X`, `#/$defs/X`) and fold `anyOf`/`oneOf`
    with `null` (what pydantic writes for `Optional[...]`) into `type: [T, "null"]`."""
    if not isinstance(spec, dict):
        return spec
    if depth > 20:
        raise SchemaFileError("`$ref` nests too deep (a recursive type?)", field=where)
    ref = spec.get("$ref")
    if isinstance(ref, str):
        rest = {k: v for k, v in spec.items() if k != "$ref"}
        return _resolve({**_referenced(ref, root, where), **rest}, root, where, depth + 1)
    for key in ("anyOf", "oneOf"):
        options = spec.get(key)
        if isinstance(options, list):
            resolved = [_resolve(o, root, where, depth + 1) for o in options]
            kinds = [o for o in resolved if not (isinstance(o, dict) and o.get("type") == "null")]
            if len(kinds) != 1:
                raise SchemaFileError(
                    f"`{key}` with {len(kinds)} non-null types is ambiguous; "
                    "give one type (optionally with `null`)",
                    field=f"{where}.{key}",
                )
            merged = {**{k: v for k, v in spec.items() if k != key}, **kinds[0]}
            if len(kinds) < len(resolved):
                base = merged.get("type")
                merged["type"] = [*(base if isinstance(base, list) else [base]), "null"]
            return merged
    if "type" not in spec and ("enum" in spec or "const" in spec):
        values = spec.get("enum", [spec.get("const")])
        types = {_JSON_NAME.get(type(v), "string") for v in values if v is not None}
        if len(types) == 1:
            return {**spec, "type": types.pop()}
    return spec


_JSON_NAME = {str: "string", bool: "boolean", int: "integer", float: "number"}


def _json_type(spec: Any, where: str, root: dict[str, Any]) -> str:
    spec = _resolve(spec, root, where)
    if not isinstance(spec, dict):
        raise SchemaFileError("a property must be an object with a `type`", field=where)
    if "x-spark-type" in spec:
        try:
            return normalize_type(str(spec["x-spark-type"]))
        except SchemaFileError as e:
            raise SchemaFileError(e.message, field=f"{where}.x-spark-type") from e
    kind = spec.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        if len(kinds) != 1:
            raise SchemaFileError(
                f"type `{kind}` is ambiguous; give one type (optionally with `null`)",
                field=f"{where}.type",
            )
        kind = kinds[0]
    if kind in _JSON_SCALARS:
        return _FORMATS.get((kind, spec.get("format")), _JSON_SCALARS[kind])
    if kind == "array":
        if "items" not in spec:
            raise SchemaFileError("an `array` needs `items` with a type", field=where)
        return f"array<{_json_type(spec['items'], where + '.items', root)}>"
    if kind == "object":
        props = spec.get("properties")
        if isinstance(props, dict) and props:
            fields = ", ".join(
                f"{_field_name(n)}: {_json_type(s, f'{where}.properties.{n}', root)}"
                for n, s in props.items()
            )
            return f"struct<{fields}>"
        extra = spec.get("additionalProperties")
        if isinstance(extra, dict):
            return f"map<string, {_json_type(extra, where + '.additionalProperties', root)}>"
        return "map<string, string>"
    expected = ", ".join(f"`{k}`" for k in [*_JSON_SCALARS, "array", "object"])
    raise SchemaFileError(
        f"type `{kind}` is not supported; use one of {expected}", field=f"{where}.type"
    )


def _field_name(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) else f"`{name.replace('`', '``')}`"


# --- Spark DDL ---------------------------------------------------------------------

_ALIASES = {
    "integer": "int",
    "long": "bigint",
    "short": "smallint",
    "byte": "tinyint",
    "real": "float",
    "dec": "decimal",
    "numeric": "decimal",
    "bool": "boolean",
    "text": "string",
}
_SIMPLE = {
    "string",
    "int",
    "bigint",
    "smallint",
    "tinyint",
    "float",
    "double",
    "boolean",
    "date",
    "timestamp",
    "timestamp_ntz",
    "timestamp_ltz",
    "binary",
    "decimal",
    "void",
    "variant",
}
_PARAM = {"decimal": 2, "varchar": 1, "char": 1}
_NAME_RE = re.compile(r"\s*(`(?:[^`]|``)+`|[A-Za-z_][A-Za-z0-9_]*)\s*:?\s*")


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split on `sep` outside `<>`, `()` and quotes."""
    parts: list[str] = []
    depth, quote, start = 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "`'\"":
            quote = ch
        elif ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def normalize_type(text: str) -> str:
    """Check a Spark type string and return it lower-cased with canonical names."""
    t = text.strip()
    low = t.lower()
    m = re.match(r"^([a-z_]+)\s*(.*)$", low, re.DOTALL)
    if not m:
        raise SchemaFileError(f"`{text}` is not a Spark type")
    base, rest = _ALIASES.get(m.group(1), m.group(1)), m.group(2).strip()
    if base in ("array", "map", "struct"):
        if not (rest.startswith("<") and rest.endswith(">")):
            raise SchemaFileError(f"`{text}`: `{base}` needs its element types in `<...>`")
        inner = t.strip()[t.strip().index("<") + 1 : -1]
        if base == "array":
            return f"array<{normalize_type(inner)}>"
        if base == "map":
            kv = split_top_level(inner)
            if len(kv) != 2:
                raise SchemaFileError(f"`{text}`: a map needs `map<key type, value type>`")
            return f"map<{normalize_type(kv[0])}, {normalize_type(kv[1])}>"
        fields = ", ".join(
            f"{_field_name(c.name)}: {c.type}" for c in parse_fields(inner, struct=True)
        )
        return f"struct<{fields}>"
    if base in _PARAM and rest:
        args = re.fullmatch(r"\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)", rest)
        if not args or (args.group(2) is not None) != (_PARAM[base] == 2):
            raise SchemaFileError(f"`{text}`: bad arguments for `{base}`")
        return (
            f"{base}({args.group(1)},{args.group(2)})"
            if args.group(2)
            else f"{base}({args.group(1)})"
        )
    if base == "decimal" and not rest:
        return "decimal(10,0)"
    if base in _SIMPLE and not rest:
        return base
    if base == "interval":
        return low
    known = ", ".join(f"`{k}`" for k in sorted(_SIMPLE | {"array<>", "map<>", "struct<>"}))
    raise SchemaFileError(f"`{text}` is not a Spark type (known: {known})")


def parse_fields(text: str, *, struct: bool = False) -> Columns:
    """Parse `name type [NOT NULL] [COMMENT '...'], ...` (a DDL string or struct body)."""
    cols = Columns()
    for part in split_top_level(text):
        m = _NAME_RE.match(part)
        if not m or (not struct and part[m.end(1) :].lstrip().startswith(":")):
            raise SchemaFileError(f"`{part}` is not `name type`")
        name = m.group(1).strip("`").replace("``", "`")
        rest = part[m.end() :]
        rest = re.split(r"\s+COMMENT\s+", rest, maxsplit=1, flags=re.IGNORECASE)[0]
        not_null = bool(re.search(r"\s+NOT\s+NULL\s*$", rest, re.IGNORECASE))
        rest = re.sub(r"\s+NOT\s+NULL\s*$", "", rest, flags=re.IGNORECASE)
        if not rest.strip():
            raise SchemaFileError(f"column `{name}` has no type")
        try:
            cols.append(Column(name, normalize_type(rest), nullable=not not_null))
        except SchemaFileError as e:
            raise SchemaFileError(f"column `{name}`: {e.message}") from e
    if not cols:
        raise SchemaFileError("no columns; write `name type, ...` (a Spark DDL string)")
    return cols


def ddl_columns(text: str) -> Columns:
    return parse_fields(text.strip().rstrip(";"))


def read_schema_file(path: Path) -> Columns:
    """Read `schemas/NAME.json` (JSON Schema) or `schemas/NAME.ddl` (Spark DDL)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".ddl":
        return ddl_columns(text)
    try:
        document = json.loads(text)
    except json.JSONDecodeError as e:
        raise SchemaFileError(
            f"not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}"
        ) from e
    return json_schema_columns(document)


# --- what the framework adds -------------------------------------------------------

KAFKA_COORDINATES = (
    Column("_topic", "string", False),
    Column("_partition", "int", False),
    Column("_offset", "bigint", False),
    Column("_timestamp", "timestamp", True),
)
CLUSTER_COLUMN = Column("_cluster", "string", False)
"""The cluster a federated table's row was read from (`source.kafka.clusters`)."""
RAW_COLUMNS = (Column("key", "binary"), Column("value", "binary"))
DEBEZIUM_COLUMNS = (
    Column("_op", "string", False),
    Column("_source_ts_ms", "bigint"),
    Column("_source_lsn", "bigint"),
)
UPSERT_COLUMNS = (Column("_deleted", "boolean", False),)
CHANGE_COLUMNS = (
    Column("_change_type", "string", False),
    Column("_commit_version", "bigint", False),
    Column("_commit_timestamp", "timestamp"),
)
WINDOW_COLUMNS = (Column("window_start", "timestamp"), Column("window_end", "timestamp"))
SCD2_COLUMNS = (
    Column("valid_from", "timestamp"),
    Column("valid_to", "timestamp"),
    Column("is_current", "boolean", False),
)
CDC_MARKERS = ("_op", "_deleted")


def kafka_columns(
    format: str, payload: Sequence[Column] | None, *, federated: bool = False
) -> Columns:
    """Columns of a Kafka-sourced table before its transform (see `parse_kafka`);
    `federated`: read from several clusters, each row with its `_cluster`."""
    coordinates = (*KAFKA_COORDINATES, CLUSTER_COLUMN) if federated else KAFKA_COORDINATES
    if format == "raw":
        return Columns([*RAW_COLUMNS, *coordinates])
    extra = {"debezium-json": DEBEZIUM_COLUMNS, "upsert-json": UPSERT_COLUMNS}.get(format, ())
    return Columns([*(payload or ()), *extra, *coordinates], opaque=payload is None)


def table_source_columns(upstream: Columns, read: str) -> Columns:
    extra = CHANGE_COLUMNS if read == "changes" else ()
    return Columns([*upstream, *extra], opaque=upstream.opaque)


def sink_columns(columns: Columns, mode: str) -> Columns:
    """What lands in the Delta table: upsert/SCD2 apply `_op`/`_deleted` and drop them."""
    if mode == "append":
        return columns
    kept = [c for c in columns if c.name not in CDC_MARKERS]
    if mode == "scd2":
        kept = [c for c in kept if c.name not in {s.name for s in SCD2_COLUMNS}] + list(
            SCD2_COLUMNS
        )
    return Columns(kept, opaque=columns.opaque)
