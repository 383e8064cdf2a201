"""What one table's query did in a run: `RunResult`, and the sum over its attempts."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from warehouse.compile.plan import TablePlan
    from warehouse.runtime.writer import BatchStats


@dataclass
class RunResult:
    """What one table's query did in this run."""

    table: str
    layer: str
    rows_read: int = 0
    rows_written: int = 0
    quarantined: int = 0
    dropped: int = 0
    batches: int = 0
    seconds: float = 0.0
    version: int | None = None
    published: int = 0
    dead_letters: int | None = None
    """Records sent to the table's dead-letter topic (`quarantine: {kafka: ...}`); None
    for a table without one."""
    skipped: str | None = None
    warned: dict[str, int] = field(default_factory=dict)
    """Rows that failed a `warn` expectation (kept, unless another set them aside), by
    expectation: the quality events' `failed`."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        if self.skipped:
            return f"{self.table} [{self.layer}]: skipped ({self.skipped})"
        return (
            f"{self.table} [{self.layer}]: {self.batches} batch(es), {self.rows_read} rows in, "
            f"{self.rows_written} written, {self.quarantined} quarantined"
            + (f", {self.dropped} dropped" if self.dropped else "")
            + warned_text(self.warned)
            + dead_letters_text(self.dead_letters)
            + (f", {self.published} published" if self.published else "")
            + (f", version {self.version}" if self.version is not None else ", no new version")
            + f", {self.seconds:.1f}s"
        )


def add_results(earlier: RunResult | None, later: RunResult) -> RunResult:
    """One table's counts over several attempts (a query started again after a failure)."""
    if earlier is None:
        return later
    return RunResult(
        table=later.table,
        layer=later.layer,
        rows_read=earlier.rows_read + later.rows_read,
        rows_written=earlier.rows_written + later.rows_written,
        quarantined=earlier.quarantined + later.quarantined,
        dropped=earlier.dropped + later.dropped,
        batches=earlier.batches + later.batches,
        seconds=earlier.seconds + later.seconds,
        version=later.version if later.version is not None else earlier.version,
        published=earlier.published + later.published,
        dead_letters=_add(earlier.dead_letters, later.dead_letters),
        warned={
            k: earlier.warned.get(k, 0) + later.warned.get(k, 0)
            for k in {**earlier.warned, **later.warned}
        },
    )


def _add(a: int | None, b: int | None) -> int | None:
    return None if a is None and b is None else (a or 0) + (b or 0)


def dead_letters_text(sent: int | None) -> str:
    """`, N dead letters sent` for a table with a dead-letter topic (None: without one)."""
    if sent is None:
        return ""
    return f", {sent} dead letter{'' if sent == 1 else 's'} sent"


def warned_text(warned: dict[str, int]) -> str:
    """`, N failed NAME (warn)` for each `warn` expectation that rows failed, or ""."""
    return "".join(f", {n} failed {name} (warn)" for name, n in warned.items())


def result_of(plan: TablePlan, stats: BatchStats, seconds: float) -> RunResult:
    """One attempt's `RunResult` from its writer's counters."""
    return RunResult(
        table=plan.name,
        layer=plan.layer,
        rows_read=sum(stats.input_rows.values()),
        rows_written=stats.rows_written,
        quarantined=stats.quarantined,
        dropped=stats.dropped,
        batches=stats.batches,
        seconds=seconds,
        version=stats.last_version,
        published=stats.published,
        dead_letters=stats.dead_letters,
        warned=dict(stats.warned),
    )
