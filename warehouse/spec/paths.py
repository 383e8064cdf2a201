"""Where a project keeps its data under `warehouse_root` (docs/architecture.md, "How a table runs"): the one layout.

    <root>/tables/<table>                Delta table
    <root>/tables/<table>__quarantine    its quarantined rows
    <root>/tables/_quality_events        per-batch expectation metrics
    <root>/checkpoints/<table>           Spark checkpoint
    <root>/checkpoints/<table>/warehouse-fingerprint.json  what its last run was built from
    <root>/checkpoints/<table>.lock      held while a process runs, resets or recovers it
    <root>/checkpoints/<table>.recovering  a recover under way on object storage
    <root>/runs/<table>.json             its state as the process running it last wrote it
    <root>/broker                        embedded broker data (unless configured)
    <root>/reports/, <root>/quality/     `warehouse check` reports and state, the
                                         quality events' summary of `warehouse status`

The root is a local path or a URI (`s3a://bucket/wh`, docs/cluster.md), and so is every
location here: strings joined with `/`. No Spark; the two existence probes at the end
go through `streams.storage`, which reads and writes these locations.
"""

from __future__ import annotations

from pathlib import Path

import streams.storage as storage

TABLES_DIR = "tables"
CHECKPOINTS_DIR = "checkpoints"
BROKER_DIR = "broker"
REPORTS_DIR = "reports"
RUNS_DIR = "runs"
QUARANTINE_SUFFIX = "__quarantine"
EVENTS_TABLE = "_quality_events"
LOCK_SUFFIX = ".lock"
RECOVERING_SUFFIX = ".recovering"
FINGERPRINT_FILE = "warehouse-fingerprint.json"
QUALITY_STATE = ("quality", "state.json")
EVENTS_SUMMARY = ("quality", "events-summary.json")


def join(root: str | Path, *parts: str) -> str:
    """`root` with `parts` appended, `/`-separated: a path stays a path, a URI a URI."""
    out = str(root)
    for p in parts:
        out = f"{out.rstrip('/')}/{p.strip('/')}" if out != "/" else f"/{p.strip('/')}"
    return out


def table_path(root: str | Path, name: str) -> str:
    return join(root, TABLES_DIR, name)


def quarantine_name(name: str) -> str:
    """The name of a table's quarantine table: `<table>__quarantine`."""
    return name + QUARANTINE_SUFFIX


def quarantine_path(root: str | Path, name: str) -> str:
    return join(root, TABLES_DIR, f"{name}{QUARANTINE_SUFFIX}")


def checkpoint_path(root: str | Path, name: str) -> str:
    return join(root, CHECKPOINTS_DIR, name)


def run_state_path(root: str | Path, name: str) -> str:
    """Where the process running table `name` keeps its state (`warehouse.runtime.run_state`)."""
    return join(root, RUNS_DIR, f"{name}.json")


def events_path(root: str | Path) -> str:
    """The Delta table of per-batch expectation metrics."""
    return join(root, TABLES_DIR, EVENTS_TABLE)


def reports_dir(root: str | Path) -> str:
    return join(root, REPORTS_DIR)


def quality_state_path(root: str | Path) -> str:
    """Where an incremental `warehouse check` keeps the last checked version per table."""
    return join(root, *QUALITY_STATE)


def is_uri(location: str | Path) -> bool:
    """Whether `location` is a URI (`s3a://...`) rather than a local path."""
    return "://" in str(location) and not str(location).startswith("file://")


def events_summary_path(root: str | Path) -> str:
    """Where `warehouse status` keeps what it summed of the quality events."""
    return join(root, *EVENTS_SUMMARY)


def broker_dir(project_dir: str | Path, root: str | Path, configured: str | None) -> Path:
    """Data folder of the embedded broker: `configured` (relative to the project folder)
    or `<root>/broker` for a local root; with the root on object storage, the project's
    `.warehouse/broker` (a broker keeps its log on a local disk)."""
    if configured:
        p = Path(configured)
        return p if p.is_absolute() else Path(project_dir) / p
    if is_uri(root):
        return Path(project_dir) / ".warehouse" / BROKER_DIR
    return Path(root) / BROKER_DIR


def lock_file(checkpoint: str | Path) -> str:
    """Where a process holds the checkpoint's table while it runs, resets or recovers it:
    a lock file on a local disk, a lease on object storage (`warehouse.runtime.locks`)."""
    return str(checkpoint).rstrip("/") + LOCK_SUFFIX


def recovering_file(checkpoint: str | Path) -> str:
    """The marker of a `warehouse recover` under way on object storage: while it is there,
    the checkpoint is being replaced and no run starts on it."""
    return str(checkpoint).rstrip("/") + RECOVERING_SUFFIX


def checkpoint_is_new(checkpoint: str | Path) -> bool:
    """Whether the checkpoint has no offsets yet (no batch was planned in it)."""
    return not storage.list_names(join(checkpoint, "offsets"))


def fingerprint_file(checkpoint: str | Path) -> str:
    """Where a run records, inside the table's checkpoint, what the table was built from
    (`warehouse.compile.fingerprint`): a reset removes it with the checkpoint."""
    return join(checkpoint, FINGERPRINT_FILE)


def checkpoint_holds_state(checkpoint: str | Path) -> bool:
    """Whether the checkpoint keeps the state of a stateful operator (Spark's `state/`)."""
    return bool(storage.list_names(join(checkpoint, "state")))


def table_exists(path: str | Path) -> bool:
    """Whether a Delta table has at least one commit at `path`."""
    return any(n.endswith(".json") for n in storage.list_names(join(path, "_delta_log")))
