"""`warehouse vacuum`: delete a table's unreferenced files, never what is still needed.

Vacuum holds the table's lock (`warehouse.runtime.locks`), so no batch of the table is
writing files it has not committed yet. Unless forced, the retention asked for must be at
least Delta's minimum (the table's `delta.deletedFileRetentionDuration`, 7 days unless the
table sets it) and what the slowest table reading this one as a stream still needs: a
reader whose checkpoint has yet to read version `v` needs the files of every version
from `v` on, and a file removed after `v` is deleted by a vacuum whose retention is
shorter than the time since `v` was committed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from warehouse.runtime.errors import VacuumRetentionError
from warehouse.runtime.locks import holding
from warehouse.spec.table import TableSource

if TYPE_CHECKING:
    from streams.delta import DeltaEngine
    from warehouse.spec.model import LoadedProject


@dataclass(frozen=True)
class RetentionFloor:
    """The least retention a vacuum of a table keeps (`hours`), and why (`because`)."""

    hours: float
    because: str


def retention_floors(project: LoadedProject, table: str, *, now: float) -> list[RetentionFloor]:
    """Delta's minimum for the table, then one floor per table reading it as a stream whose
    checkpoint has versions of it yet to read (`now`: epoch seconds)."""
    from streams.delta import commit_time, deleted_file_retention, delta_source_position, table_id

    path = str(project.table_path(table))
    setting, hours = deleted_file_retention(path)
    floors = [
        RetentionFloor(
            hours,
            f"Delta's minimum, the table's `delta.deletedFileRetentionDuration` (`{setting}`)",
        )
    ]
    ident = table_id(path)
    for reader in _stream_readers(project, table):
        version = delta_source_position(project.checkpoint_path(reader), ident)
        committed = None if version is None else commit_time(path, version)
        if committed is None:
            continue
        src = project.tables[reader].spec.source
        read = src.read if isinstance(src, TableSource) else "append"
        floors.append(
            RetentionFloor(
                max(0.0, now - committed) / 3600.0,
                f"what `{reader}` ({project.tables[reader].path}, `read: {read}`) still needs: "
                f"its checkpoint has yet to read version {version}, committed "
                f"{max(0.0, now - committed) / 3600.0:.1f} hours ago",
            )
        )
    return floors


def _stream_readers(project: LoadedProject, table: str) -> list[str]:
    """The tables that read `table` as a stream (its source or a joined stream)."""
    return [
        name for name, defn in project.tables.items() if table in defn.spec.source.upstream_tables
    ]


def vacuum(
    project: LoadedProject,
    table: str,
    *,
    retention_hours: int,
    force: bool,
    engine: Callable[[], tuple[DeltaEngine, Any]],
    now: Callable[[], float] = time.time,
) -> list[str]:
    """Vacuum `table` with `retention_hours` under its lock; the files deleted. `engine()`
    gives the Delta engine and session to vacuum with, asked for once the lock is held and
    the retention allowed. A retention below a floor (`retention_floors`) is refused
    (`VacuumRetentionError`) unless `force`."""
    path = str(project.table_path(table))
    with holding(project, [table], doing="vacuum"):
        if not force:
            _check(project, table, retention_hours, retention_floors(project, table, now=now()))
        delta, spark = engine()
        return delta.vacuum(spark, path, retention_hours, force=force)


def _check(
    project: LoadedProject, table: str, retention_hours: int, floors: list[RetentionFloor]
) -> None:
    highest = max(floors, key=lambda f: f.hours)
    if retention_hours >= highest.hours:
        return
    least = math.ceil(highest.hours)
    raise VacuumRetentionError(
        f"Table `{table}` ({project.tables[table].path}): vacuum with a retention of "
        f"`{retention_hours}` hours is refused: the least it may keep is {least} hours, "
        f"{highest.because}. A shorter retention deletes files that are still needed. Give "
        f"`--retention-hours {least}` or more, or `--force` to delete them anyway (a stream "
        "reader that still needs them then fails, and `warehouse reset` rebuilds it).",
        table=table,
        retention_hours=retention_hours,
        minimum_hours=least,
    )
