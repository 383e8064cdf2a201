"""Where a project keeps its data under `warehouse_root` (docs/architecture.md, "How a table runs"): the one layout.

    <root>/tables/<table>                Delta table
    <root>/tables/<table>__quarantine    its quarantined rows
    <root>/tables/_quality_events        per-batch expectation metrics
    <root>/checkpoints/<table>           Spark checkpoint
    <root>/checkpoints/<table>.lock      locked while a process runs, resets or recovers it
    <root>/broker                        embedded broker data (unless configured)
    <root>/reports/, <root>/quality/     `warehouse check` reports and state, the
                                         quality events' summary of `warehouse status`

Plain path arithmetic and two existence probes; no Spark.
"""

from __future__ import annotations

from pathlib import Path

TABLES_DIR = "tables"
CHECKPOINTS_DIR = "checkpoints"
BROKER_DIR = "broker"
REPORTS_DIR = "reports"
QUARANTINE_SUFFIX = "__quarantine"
EVENTS_TABLE = "_quality_events"
LOCK_SUFFIX = ".lock"
QUALITY_STATE = ("quality", "state.json")
EVENTS_SUMMARY = ("quality", "events-summary.json")


def table_path(root: str | Path, name: str) -> Path:
    return Path(root) / TABLES_DIR / name


def quarantine_path(root: str | Path, name: str) -> Path:
    return Path(root) / TABLES_DIR / f"{name}{QUARANTINE_SUFFIX}"


def checkpoint_path(root: str | Path, name: str) -> Path:
    return Path(root) / CHECKPOINTS_DIR / name


def events_path(root: str | Path) -> Path:
    """The Delta table of per-batch expectation metrics."""
    return Path(root) / TABLES_DIR / EVENTS_TABLE


def reports_dir(root: str | Path) -> Path:
    return Path(root) / REPORTS_DIR


def quality_state_path(root: str | Path) -> Path:
    """Where an incremental `warehouse check` keeps the last checked version per table."""
    return Path(root).joinpath(*QUALITY_STATE)


def events_summary_path(root: str | Path) -> Path:
    """Where `warehouse status` keeps what it summed of the quality events."""
    return Path(root).joinpath(*EVENTS_SUMMARY)


def broker_dir(project_dir: str | Path, root: str | Path, configured: str | None) -> Path:
    """Data folder of the embedded broker: `configured` (relative to the project folder)
    or `<root>/broker`."""
    if configured:
        p = Path(configured)
        return p if p.is_absolute() else Path(project_dir) / p
    return Path(root) / BROKER_DIR


def lock_file(checkpoint: str | Path) -> Path:
    """The file a process locks while it runs, resets or recovers the checkpoint's table."""
    return Path(str(checkpoint).rstrip("/") + LOCK_SUFFIX)


def checkpoint_is_new(checkpoint: str | Path) -> bool:
    """Whether the checkpoint has no offsets yet (no batch was planned in it)."""
    offsets = Path(checkpoint) / "offsets"
    return not offsets.is_dir() or not any(offsets.iterdir())


def table_exists(path: str | Path) -> bool:
    """Whether a Delta table has at least one commit at `path`."""
    log = Path(path) / "_delta_log"
    return log.is_dir() and any(log.glob("*.json"))
