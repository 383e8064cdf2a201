"""The result of `warehouse check`: per table and overall, as JSON and as text."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any


@dataclass
class TableResult:
    table: str
    layer: str
    path: str
    status: str  # passed | failed | not_built | no_new_rows
    rows: int = 0
    delta_version: int | None = None
    from_version: int | None = None
    message: str | None = None
    expectations: list[dict[str, Any]] = field(default_factory=list)

    @property
    def success(self) -> bool:
        return self.status in ("passed", "no_new_rows")


@dataclass
class CheckReport:
    """The outcome of one `warehouse check` run."""

    tables: list[TableResult]
    report_dir: Path
    """The local folder the report was written in."""
    started_at: datetime
    incremental: bool = False
    location: str | None = None
    """Where the report was published when not in `report_dir` (object storage: the
    local folder is a temporary one, removed once published)."""
    docs_published: bool = False

    @property
    def success(self) -> bool:
        return all(t.success for t in self.tables)

    @property
    def exit_code(self) -> int:
        return 0 if self.success else 1

    @property
    def results_path(self) -> Path:
        return self.report_dir / "results.json"

    @property
    def data_docs_index(self) -> Path:
        return self.report_dir / "data_docs" / "index.html"

    def to_dict(self) -> dict[str, Any]:
        failed = [e for t in self.tables for e in t.expectations if not e["success"]]
        return {
            "success": self.success,
            "started_at": self.started_at.isoformat(),
            "incremental": self.incremental,
            "report_dir": self.location or str(self.report_dir),
            "data_docs": self._docs(),
            "statistics": {
                "tables": len(self.tables),
                "tables_failed": sum(not t.success for t in self.tables),
                "expectations": sum(len(t.expectations) for t in self.tables),
                "expectations_failed": len(failed),
            },
            "tables": {
                t.table: {
                    "layer": t.layer,
                    "path": t.path,
                    "status": t.status,
                    "success": t.success,
                    "rows": t.rows,
                    "delta_version": t.delta_version,
                    "from_version": t.from_version,
                    "message": t.message,
                    "expectations": t.expectations,
                }
                for t in self.tables
            },
        }

    def summary_text(self) -> str:
        """The table printed by the CLI: table, expectation, result, unexpected."""
        rows: list[tuple[str, str, str, str]] = []
        for t in self.tables:
            if not t.expectations:
                rows.append((t.table, "-", t.status.upper().replace("_", " "), t.message or ""))
            for e in t.expectations:
                unexpected = e.get("unexpected_count")
                shown = "" if unexpected is None else str(unexpected)
                if e.get("error"):
                    shown = f"error: {e['error']}"
                rows.append((t.table, e["expectation"], "PASS" if e["success"] else "FAIL", shown))
        head = ("TABLE", "EXPECTATION", "RESULT", "UNEXPECTED")
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(3)]
        lines = []
        for r in [head, *rows]:
            lines.append("  ".join(r[i].ljust(widths[i]) for i in range(3)) + "  " + r[3])
        n_fail = sum(1 for r in rows if r[2] not in ("PASS", "NO NEW ROWS"))
        verdict = "all expectations passed" if self.success else f"{n_fail} failed"
        if not self.tables:
            verdict = "no table with expectations selected"
        lines.append("")
        results = f"{self.location}/results.json" if self.location else self.results_path
        lines.append(f"{verdict}; report: {results}")
        return "\n".join(line.rstrip() for line in lines)

    def _docs(self) -> str | None:
        if self.location is not None:
            return f"{self.location}/data_docs/index.html" if self.docs_published else None
        return str(self.data_docs_index) if self.data_docs_index.exists() else None
