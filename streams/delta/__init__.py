"""Delta side of the streaming I/O: the idempotent sink, the stream source, maintenance.

- `write_batch` / `read_delta_stream`: the entry points, on the engine a target or
  call names; `delta_engine(name)` gives the engine itself (the Python or the
  native one, behind the `DeltaEngine` protocol, with its capabilities).
- the sink modes: `append`, `upsert` (`streams.delta.sink`) and `scd2`
  (`streams.delta.scd2`, SCD type 2 history);
- the commit primitives (`streams.delta.commit`) for a writer of its own files
  (`append_files`, with the Arrow file writer `file_writer` and `write_files`), as the
  Kafka landing path (`streams.landing`) is; `KeptTable` / `kept_table` for a table
  kept open between commits.

Callers import from this package only; its modules are its own.

See docs/architecture.md ("Protocols between packages", `streams.delta`) for the contract the runtime builds on.
"""

from __future__ import annotations

from streams.delta.arrow import read_table
from streams.delta.checkpoint import (
    batch_end_offsets,
    checkpoint_query_id,
    delta_source_engines,
    delta_source_position,
    remove_interrupted_writes,
    write_replay_checkpoint,
)
from streams.delta.commit import (
    FileEntry,
    KeptTable,
    append_files,
    committed,
    kept_table,
    latest_version,
)
from streams.delta.driver_merge import local_path
from streams.delta.engine import (
    DeltaEngine,
    delta_engine,
    read_delta_stream,
    write_batch,
)
from streams.delta.errors import (
    DeltaConfigError,
    DeltaReadError,
    DeltaSchemaError,
    DeltaStreamError,
    DeltaTableNotFoundError,
    DeltaWriteError,
    NativeEngineUnavailableError,
)
from streams.delta.faults import crash_point
from streams.delta.files import STAGING_DIR, file_writer
from streams.delta.maintenance import (
    RecordedBatch,
    commit_time,
    deleted_file_retention,
    first_recorded_start,
    optimize,
    recorded_batch,
    recorded_offsets,
    remove_orphans,
    table_id,
    table_info,
    vacuum,
)
from streams.delta.native import native_delta_available
from streams.delta.scd2_plan import SCD2_COLUMNS
from streams.delta.schema import arrow_schema
from streams.delta.sink import file_entry, write_files
from streams.delta.target import DeltaTarget, commit_properties
from streams.delta.tombstones import tombstone_path

__all__ = [
    "tombstone_path",
    "SCD2_COLUMNS",
    "STAGING_DIR",
    "DeltaConfigError",
    "DeltaEngine",
    "DeltaReadError",
    "DeltaSchemaError",
    "DeltaStreamError",
    "DeltaTableNotFoundError",
    "DeltaTarget",
    "DeltaWriteError",
    "FileEntry",
    "KeptTable",
    "NativeEngineUnavailableError",
    "RecordedBatch",
    "append_files",
    "arrow_schema",
    "batch_end_offsets",
    "checkpoint_query_id",
    "commit_properties",
    "commit_time",
    "committed",
    "crash_point",
    "delta_engine",
    "deleted_file_retention",
    "delta_source_engines",
    "delta_source_position",
    "file_entry",
    "file_writer",
    "first_recorded_start",
    "kept_table",
    "latest_version",
    "local_path",
    "native_delta_available",
    "optimize",
    "read_delta_stream",
    "read_table",
    "recorded_batch",
    "recorded_offsets",
    "remove_interrupted_writes",
    "remove_orphans",
    "table_id",
    "table_info",
    "vacuum",
    "write_batch",
    "write_files",
    "write_replay_checkpoint",
]
