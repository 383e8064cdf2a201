"""`warehouse check`: every selected table's expectations as a great-expectations suite.

For each table with expectations, its Delta table is read with delta-rs into
pandas (all rows, or with `incremental=True` the rows inserted since the last
check, from the change data feed), and judged by:

- great-expectations: every row- and table-level expectation GX knows;
- the warehouse itself: `expect_column_values_to_be_fresh` (an extension) and the
  column-type expectations, which name Spark types and are judged on the Delta schema.

It writes `<report_dir>/results.json` and GX's HTML Data Docs
(`<report_dir>/data_docs/index.html`). A selected table with expectations whose
Delta table does not exist yet is a failure ("not built yet"): a CI gate must
not pass on an empty warehouse.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import streams.storage as storage
from warehouse.quality.errors import CheckSetupError
from warehouse.quality.gx_suite import GxRun, gx_evaluated, plain
from warehouse.quality.report import CheckReport, TableResult
from warehouse.spec.expectations import (
    EXPECTATION_TYPES,
    expectation_id,
    interval_seconds,
    normalize_type_name,
)
from warehouse.spec.paths import quality_state_path, reports_dir, table_path
from warehouse.spec.table import Expectation, TableDefinition

if TYPE_CHECKING:
    import pyarrow as pa

logger = logging.getLogger(__name__)

_CDF_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")


def _select(project: Any, layer: str | None, table: str | None) -> list[TableDefinition]:
    tables: dict[str, TableDefinition] = dict(project.tables)
    if table is not None:
        if table not in tables:
            known = ", ".join(f"`{t}`" for t in sorted(tables)) or "none"
            raise CheckSetupError(
                f"`warehouse check --table {table}`: no table `{table}` in the project "
                f"(tables: {known}).",
                table=table,
            )
        selected = [tables[table]]
    else:
        selected = list(tables.values())
    if layer is not None:
        selected = [t for t in selected if t.layer == layer]
    order = {name: i for i, name in enumerate(_graph_order(project, tables))}
    return sorted((t for t in selected if t.spec.expectations), key=lambda t: order.get(t.name, 0))


def _graph_order(project: Any, tables: dict[str, TableDefinition]) -> list[str]:
    order = getattr(getattr(project, "graph", None), "order", None)
    names = list(order() if callable(order) else order or [])
    return (
        names
        if set(names) >= set(tables)
        else sorted(tables, key=lambda n: (tables[n].layer_index, n))
    )


def _load_state(path: str) -> dict[str, Any]:
    try:
        text = storage.read_text(path)
        if text is None:
            return {"tables": {}}
        state = json.loads(text)
    except (OSError, ValueError) as e:
        raise CheckSetupError(
            f"cannot read the incremental check state `{path}`: {e}. Delete the file to "
            "check every row again."
        ) from e
    return state if isinstance(state.get("tables"), dict) else {"tables": {}}


def _referenced_columns(expectations: Sequence[Expectation]) -> list[str] | None:
    """The columns the expectations name; None (all) when one names none (row counts)."""
    names: list[str] = []
    for exp in expectations:
        args = EXPECTATION_TYPES[exp.type].columns_args
        if not args:
            return None
        for arg in args:
            value = exp.kwargs.get(arg)
            for name in value if isinstance(value, list) else [value]:
                if isinstance(name, str) and name not in names:
                    names.append(name)
    return names


def _read_rows(
    path: str, *, since: int | None, columns: list[str] | None = None
) -> tuple[pa.Table | None, int, int | None]:
    """(rows, current version, first version read); rows is None when there is nothing new."""
    from deltalake import DeltaTable

    from streams.delta import read_table

    dt = DeltaTable(path, storage_options=storage.current().object_store_options(path))
    version = dt.version()
    if since is None or since > version:
        if columns is not None:
            # Only what is judged is loaded; a missing column is left for GX to report.
            present = {f.name for f in dt.schema().fields}
            if set(columns) <= present:
                return read_table(dt, columns=columns), version, None
        return read_table(dt), version, None
    if since == version:
        return None, version, since + 1
    try:
        import pyarrow as pa

        reader = dt.load_cdf(starting_version=since + 1, ending_version=version)
        changes = _without_views(pa.RecordBatchReader.from_stream(reader).read_all())
    except Exception as e:  # delta-rs raises several error types for a table without CDF
        raise CheckSetupError(
            f"`warehouse check --incremental`: cannot read the change data feed of `{path}` "
            f"from version {since + 1}: {e}. Tables written by the warehouse have it on; run "
            "without `--incremental` to check all rows."
        ) from e
    import pyarrow.compute as pc

    kinds = changes.column("_change_type").cast("string")
    keep = pc.is_in(kinds, value_set=_pa_strings(["insert", "update_postimage"]))
    changes = changes.filter(keep).drop_columns(
        [c for c in _CDF_COLUMNS if c in changes.column_names]
    )
    return changes, version, since + 1


def _without_views(table: pa.Table) -> pa.Table:
    """The change feed comes as string_view/binary_view, which few compute kernels take."""
    import pyarrow as pa

    fields = []
    for f in table.schema:
        if f.type == pa.string_view():
            f = f.with_type(pa.string())
        elif f.type == pa.binary_view():
            f = f.with_type(pa.binary())
        fields.append(f)
    return table.cast(pa.schema(fields))


def _pa_strings(values: Sequence[str]) -> Any:
    import pyarrow as pa

    return pa.array(list(values), pa.string())


_ARROW_TO_SPARK = {
    "int8": "tinyint", "int16": "smallint", "int32": "int", "int64": "bigint",
    "float": "float", "double": "double", "halffloat": "float",
    "string": "string", "large_string": "string", "string_view": "string",
    "bool": "boolean", "date32[day]": "date", "binary": "binary", "large_binary": "binary",
}  # fmt: skip


def _spark_type_of(arrow_type: Any) -> str:
    import pyarrow as pa

    if pa.types.is_timestamp(arrow_type):
        return "timestamp" if arrow_type.tz else "timestamp_ntz"
    if pa.types.is_decimal(arrow_type):
        return "decimal"
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return "array"
    if pa.types.is_struct(arrow_type):
        return "struct"
    if pa.types.is_map(arrow_type):
        return "map"
    return _ARROW_TO_SPARK.get(str(arrow_type), str(arrow_type))


def _warehouse_result(exp: Expectation, rows: pa.Table, *, now: datetime) -> dict[str, Any]:
    """Judge the expectations GX does not: freshness and Spark column types."""
    kw = exp.kwargs
    column = kw.get("column")
    base: dict[str, Any] = {
        "success": False, "observed_value": None, "element_count": rows.num_rows,
        "unexpected_count": None, "unexpected_percent": None, "unexpected_values": [],
        "error": None,
    }  # fmt: skip
    if column not in rows.column_names:
        base["error"] = f"column `{column}` is not in the table ({', '.join(rows.column_names)})"
        return base
    if exp.type == "expect_column_values_to_be_fresh":
        import pyarrow.compute as pc

        newest = pc.max(rows.column(column)).as_py()
        limit = interval_seconds(kw["max_age"])
        if newest is None:
            base["observed_value"] = {"newest": None, "max_age_seconds": limit}
            base["error"] = f"column `{column}` has no value to judge freshness by"
            return base
        if not isinstance(newest, datetime):
            base["error"] = f"column `{column}` is not a timestamp (newest value `{newest}`)"
            return base
        if newest.tzinfo is None:
            newest = newest.replace(tzinfo=UTC)  # timestamp_ntz: read as UTC like the session
        age = (now - newest).total_seconds()
        base["observed_value"] = {
            "newest": newest.isoformat(), "age_seconds": round(age, 3), "max_age_seconds": limit,
        }  # fmt: skip
        base["success"] = age <= limit
        return base
    actual = _spark_type_of(rows.schema.field(column).type)
    wanted = [kw["type_"]] if "type_" in kw else list(kw.get("type_list") or [])
    base["observed_value"] = actual
    base["success"] = actual in {normalize_type_name(w) for w in wanted}
    non_null = rows.num_rows - rows.column(column).null_count
    base["unexpected_count"] = 0 if base["success"] else non_null
    return base


def _check_table(
    defn: TableDefinition,
    path: str,
    gx_run: GxRun | None,
    *,
    since: int | None,
    now: datetime,
) -> TableResult:
    from deltalake import DeltaTable

    result = TableResult(table=defn.name, layer=defn.layer, path=path, status="failed")
    options = storage.current().object_store_options(path)
    if not DeltaTable.is_deltatable(path, storage_options=options):
        result.status = "not_built"
        result.message = (
            f"table `{defn.name}` is not built yet (no Delta table at {path}); run "
            f"`warehouse run --layer {defn.layer}` first"
        )
        return result
    rows, version, first = _read_rows(
        path, since=since, columns=_referenced_columns(defn.spec.expectations)
    )
    result.delta_version, result.from_version = version, first
    if rows is None:
        result.status = "no_new_rows"
        result.message = f"no new rows since version {since}"
        return result
    result.rows = rows.num_rows
    exps = list(defn.spec.expectations)
    gx_results: dict[str, dict[str, Any]] = {}
    gx_exps = [e for e in exps if gx_evaluated(e)]
    if gx_exps and gx_run is not None:
        gx_results = gx_run.validate(defn.name, rows.to_pandas(), gx_exps)
    for exp in exps:
        eid = expectation_id(exp)
        judged = gx_results.get(eid) if gx_evaluated(exp) else _warehouse_result(exp, rows, now=now)
        if judged is None:  # GX did not return it: report instead of passing silently
            judged = {"success": False, "error": "great-expectations returned no result"}
        etype = EXPECTATION_TYPES[exp.type]
        result.expectations.append(
            {
                "expectation": eid,
                "type": exp.type,
                "kwargs": plain(exp.kwargs),
                "level": etype.level,
                "on_violation": exp.on_violation,
                "engine": "great_expectations" if gx_evaluated(exp) else "warehouse",
                **judged,
            }
        )
    result.status = "passed" if all(e["success"] for e in result.expectations) else "failed"
    return result


def run_checks(
    project: Any,
    *,
    layer: str | None = None,
    table: str | None = None,
    report_dir: str | os.PathLike[str] | None = None,
    incremental: bool = False,
    now: datetime | None = None,
) -> CheckReport:
    """Validate the selected tables; write results.json and Data Docs under `report_dir`.

    `now` (UTC) is the clock for freshness and the default report folder name,
    `<root>/reports/check-<UTC timestamp>`. With `incremental`, only rows inserted
    since the previous incremental check are judged (the last checked Delta version
    per table is kept in `<root>/quality/state.json`, advanced after every check,
    failed or not: an increment's failure is reported by the run that saw it).
    """
    started = now or datetime.now(UTC)
    root = str(project.root)
    target = (
        str(report_dir)
        if report_dir is not None
        else storage.join(reports_dir(root), f"check-{started.strftime('%Y%m%dT%H%M%S%fZ')}")
    )
    local = storage.local_path(target)
    out_dir = Path(local) if local is not None else Path(tempfile.mkdtemp(prefix="wh-check-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    selected = _select(project, layer, table)
    state_path = quality_state_path(root)
    state = _load_state(state_path) if incremental else {"tables": {}}
    # Data Docs are written whenever a table is checked, so CI can always publish them.
    gx_run = GxRun.start(out_dir / "data_docs") if selected else None
    results: list[TableResult] = []
    for defn in selected:
        path = table_path(root, defn.name)
        since = state["tables"].get(defn.name, {}).get("version") if incremental else None
        res = _check_table(defn, path, gx_run, since=since, now=started)
        results.append(res)
        logger.info(
            "check %s: %s (%d rows, %d expectations)",
            defn.name, res.status, res.rows, len(res.expectations),
        )  # fmt: skip
        if incremental and res.delta_version is not None:
            state["tables"][defn.name] = {
                "version": res.delta_version,
                "checked_at": started.isoformat(),
                "status": res.status,
            }
    if gx_run is not None and not gx_run.index_html().exists():
        gx_run.build_docs()  # no table was validated: still give CI an (empty) index
    report = CheckReport(tables=results, report_dir=out_dir, started_at=started,
                         incremental=incremental)  # fmt: skip
    if incremental:
        storage.write_text(state_path, json.dumps(state, indent=2, sort_keys=True))
    if local is None:
        report.location, report.docs_published = target, report.data_docs_index.exists()
    report.results_path.write_text(json.dumps(report.to_dict(), indent=2, default=str))
    if local is None:
        _publish(out_dir, target)
    return report


def _publish(folder: Path, location: str) -> None:
    """Copy the report written in the local `folder` to `location`, then remove `folder`."""
    try:
        for f in sorted(p for p in folder.rglob("*") if p.is_file()):
            storage.write_bytes(
                storage.join(location, f.relative_to(folder).as_posix()), f.read_bytes()
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
