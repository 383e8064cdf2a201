"""Great-expectations suites built from a table's declared expectations.

One ephemeral (in-memory) GX context per `warehouse check` run, offline: usage
statistics are off and nothing is written outside the report folder, whose
`data_docs/` receives GX's HTML Data Docs through a local site builder.

Great-expectations is imported here only, on first use; `warehouse.quality`
and its registry stay importable without it.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from warehouse.spec.expectations import EXPECTATION_TYPES, expectation_id
from warehouse.spec.table import Expectation

logger = logging.getLogger(__name__)

SITE_NAME = "warehouse"
MAX_UNEXPECTED_VALUES = 5


def gx_class_name(type_name: str) -> str:
    """`expect_column_values_to_not_be_null` -> `ExpectColumnValuesToNotBeNull`."""
    special = {"a": "A", "b": "B"}
    return "".join(special.get(p, p.capitalize()) for p in type_name.split("_"))


def _import_gx() -> Any:
    # GX reads this when a context is created; the CLI must never phone home.
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations as gx

    return gx


def plain(value: Any) -> Any:
    """A JSON-safe copy of a GX result value (NaN -> None, timestamps -> ISO text)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return value.hex()
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [plain(v) for v in value]
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item):
        try:
            return plain(item())
        except (TypeError, ValueError):
            pass
    iso = getattr(value, "isoformat", None)  # pandas Timestamp
    if callable(iso):
        return None if str(value) == "NaT" else iso()
    return str(value)


def _timestamp_bounds(kwargs: dict[str, Any], frame: Any) -> dict[str, Any]:
    """String bounds on a timestamp column as UTC timestamps, which pandas can compare."""
    import pandas as pd

    column = kwargs.get("column")
    if frame is None or column not in getattr(frame, "columns", ()):
        return kwargs
    dtype = frame[column].dtype
    if not pd.api.types.is_datetime64_any_dtype(dtype):
        return kwargs
    tz = getattr(dtype, "tz", None)
    out = dict(kwargs)
    for key in ("min_value", "max_value"):
        value = out.get(key)
        if isinstance(value, str):
            ts = pd.Timestamp(value)
            if tz is not None and ts.tzinfo is None:
                ts = ts.tz_localize("UTC")
            elif tz is None and ts.tzinfo is not None:
                ts = ts.tz_convert("UTC").tz_localize(None)
            out[key] = ts
    return out


def _exception_message(info: Any) -> str | None:
    """GX reports a raised exception flat, or nested per metric."""
    if not isinstance(info, Mapping):
        return None
    if info.get("raised_exception"):
        return str(info.get("exception_message") or "exception raised")
    for value in info.values():
        found = _exception_message(value)
        if found:
            return found
    return None


def to_gx(expectation: Expectation, frame: Any = None) -> Any:
    """The GX expectation object for a registered, non-extension expectation."""
    import great_expectations.expectations as gxe

    kwargs = _timestamp_bounds(dict(expectation.kwargs), frame)
    if expectation.type == "expect_column_pair_values_a_to_be_greater_than_b":
        # The stream does not judge a pair with a null; neither does the check.
        kwargs.setdefault("ignore_row_if", "either_value_is_missing")
    cls = getattr(gxe, gx_class_name(expectation.type))
    return cls(**kwargs, meta={"warehouse_id": expectation_id(expectation)})


@dataclass
class GxRun:
    """The GX context of one `warehouse check` run, with its Data Docs site."""

    context: Any
    docs_dir: Path

    @classmethod
    def start(cls, docs_dir: Path) -> GxRun:
        gx = _import_gx()
        from great_expectations.data_context.types.base import (
            DataContextConfig,
            InMemoryStoreBackendDefaults,
            ProgressBarsConfig,
        )

        docs_dir.mkdir(parents=True, exist_ok=True)
        config = DataContextConfig(
            store_backend_defaults=InMemoryStoreBackendDefaults(init_temp_docs_sites=False),
            analytics_enabled=False,
            progress_bars=ProgressBarsConfig(globally=False),
            data_docs_sites={
                SITE_NAME: {
                    "class_name": "SiteBuilder",
                    "show_how_to_buttons": False,
                    "store_backend": {
                        "class_name": "TupleFilesystemStoreBackend",
                        "base_directory": str(docs_dir),
                    },
                    "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
                }
            },
        )
        context = gx.get_context(mode="ephemeral", project_config=config)
        context.data_sources.add_pandas("warehouse")
        return cls(context=context, docs_dir=docs_dir)

    def validate(
        self, table: str, frame: Any, expectations: Sequence[Expectation]
    ) -> dict[str, dict[str, Any]]:
        """Run the GX suite of one table over a pandas frame: results by expectation id."""
        gx = _import_gx()
        from great_expectations.checkpoint import UpdateDataDocsAction

        ctx = self.context
        asset = ctx.data_sources.get("warehouse").add_dataframe_asset(name=table)
        batch = asset.add_batch_definition_whole_dataframe(f"{table}_all_rows")
        suite = ctx.suites.add(gx.ExpectationSuite(name=table))
        for exp in expectations:
            suite.add_expectation(to_gx(exp, frame))
        vd = ctx.validation_definitions.add(
            gx.ValidationDefinition(data=batch, suite=suite, name=f"{table}_check")
        )
        checkpoint = ctx.checkpoints.add(
            gx.Checkpoint(
                name=f"{table}_checkpoint",
                validation_definitions=[vd],
                actions=[UpdateDataDocsAction(name="data_docs", site_names=[SITE_NAME])],
                result_format={
                    "result_format": "SUMMARY",
                    "partial_unexpected_count": MAX_UNEXPECTED_VALUES,
                },
            )
        )
        result = checkpoint.run(batch_parameters={"dataframe": frame})
        out: dict[str, dict[str, Any]] = {}
        for run in result.run_results.values():
            for r in run.results:
                eid = (r.expectation_config.meta or {}).get("warehouse_id")
                res = r.result or {}
                out[eid] = {
                    "success": bool(r.success),
                    "observed_value": plain(res.get("observed_value")),
                    "element_count": plain(res.get("element_count")),
                    "unexpected_count": plain(res.get("unexpected_count")),
                    "unexpected_percent": plain(res.get("unexpected_percent")),
                    "unexpected_values": plain(
                        (res.get("partial_unexpected_list") or [])[:MAX_UNEXPECTED_VALUES]
                    ),
                    "error": _exception_message(r.exception_info),
                }
        return out

    def build_docs(self) -> None:
        self.context.build_data_docs(site_names=[SITE_NAME])

    def index_html(self) -> Path:
        return self.docs_dir / "index.html"


def gx_evaluated(expectation: Expectation) -> bool:
    """True when GX judges the type; False for the warehouse's own checks."""
    etype = EXPECTATION_TYPES[expectation.type]
    return not etype.extension and expectation.type not in WAREHOUSE_EVALUATED


# The column-type expectations name Spark types (`bigint`, `LongType`), which GX's
# pandas engine does not know; `warehouse check` judges them on the Delta schema.
WAREHOUSE_EVALUATED = frozenset(
    {"expect_column_values_to_be_of_type", "expect_column_values_to_be_in_type_list"}
)
