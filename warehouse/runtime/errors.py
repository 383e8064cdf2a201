"""Errors raised while building or running queries."""

from __future__ import annotations

from warehouse.compile.errors import CheckpointError
from warehouse.errors import WarehouseError

__all__ = [
    "CatalogError",
    "CheckpointError",
    "ClassArchiveError",
    "DataLossRefusedError",
    "DefinitionChangedError",
    "JarsError",
    "MirrorError",
    "NewCheckpointError",
    "QueryFailedError",
    "RecoverError",
    "RuntimeConfigError",
    "SessionStartError",
    "TableBusyError",
    "VacuumRetentionError",
]


class RuntimeConfigError(WarehouseError):
    """The environment cannot run what the configuration asks for (engine, broker, session)."""

    exit_code = 2


class CatalogError(RuntimeConfigError):
    """The session's catalog cannot hold the tables by name (`catalog:`): it cannot read
    Delta, or refused a registration; `table` names the table where there is one."""


class MirrorError(RuntimeConfigError):
    """`warehouse mirror` cannot start MirrorMaker 2: no flows, no Java, or its jars are
    not cached."""


class SessionStartError(RuntimeConfigError):
    """Spark could not start a session (no Java, a bad `spark.master` or `spark.conf`);
    `master` is the master it was asked for."""

    def __init__(self, message: str, *, master: str) -> None:
        super().__init__(message)
        self.master = master


class QueryFailedError(WarehouseError):
    """A table's streaming query could not be built, or stopped with an exception; `table`
    and `layer` name it."""

    def __init__(self, message: str, *, table: str, layer: str | None = None) -> None:
        super().__init__(message, table=table)
        self.layer = layer


class TableBusyError(RuntimeConfigError):
    """Another process is running, resetting or recovering a table this process asked for;
    `table` names the first such table."""


class NewCheckpointError(RuntimeConfigError):
    """A table's checkpoint is new while its Delta table already holds batches: a run would
    read the input again from its start. `table` names the first such table and `path`
    its checkpoint."""

    def __init__(self, message: str, *, table: str, path: str) -> None:
        super().__init__(message, table=table)
        self.path = path


class DefinitionChangedError(RuntimeConfigError):
    """A table changed since its last run so that it needs a full refresh it was not
    given (`warehouse run --full-refresh T`); `table` names the first such table."""


class DataLossRefusedError(RuntimeConfigError):
    """A full refresh would lose rows: the table's Kafka source no longer holds the
    offsets its rows start from (retention); `table` names the first such table."""


class RecoverError(WarehouseError):
    """`warehouse recover` / `reset` could not do what was asked."""


class JarsError(WarehouseError):
    """The native engines' jars could not be resolved (no network, a version not served)."""


class ClassArchiveError(WarehouseError):
    """A class archive for local sessions could not be made (no `java`, the child JVM
    failed); sessions then start without one."""


class VacuumRetentionError(WarehouseError):
    """A vacuum's retention (`retention_hours`) is below what the table must keep
    (`minimum_hours`: Delta's minimum, or what a stream reader still needs)."""

    exit_code = 2

    def __init__(
        self, message: str, *, table: str, retention_hours: float, minimum_hours: float
    ) -> None:
        super().__init__(message, table=table)
        self.retention_hours = retention_hours
        self.minimum_hours = minimum_hours
