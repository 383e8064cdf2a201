"""Delta side of the streaming I/O: the idempotent sink, the stream source, maintenance.

- `write_batch` / `read_delta_stream`: the entry points, on the engine a target or
  call names; `delta_engine(name)` gives the engine itself (`PythonDelta`,
  `NativeDelta`, behind the `DeltaEngine` protocol) with its `available(spark)`.
- the sink modes: `append`, `upsert` (`streams.delta.sink`) and `scd2`
  (`streams.delta.scd2`, SCD type 2 history);
- the commit primitives (`streams.delta.commit`) for a writer of its own files
  (`append_files`), as the Kafka landing path (`streams.landing`) is.

See docs/architecture.md (`streams.delta`) for the contract the runtime builds on.
"""

from __future__ import annotations

from streams.delta._faults import crash_point
from streams.delta._files import STAGING_DIR, file_writer
from streams.delta._schema import arrow_schema
from streams.delta.arrow import read_table
from streams.delta.checkpoint import (
    batch_end_offsets,
    checkpoint_query_id,
    delta_source_engines,
    remove_interrupted_writes,
)
from streams.delta.commit import FileEntry, append_files, committed, latest_version
from streams.delta.driver_merge import local_path
from streams.delta.engine import (
    DeltaEngine,
    NativeDelta,
    PythonDelta,
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
from streams.delta.maintenance import (
    optimize,
    recorded_offsets,
    remove_orphans,
    table_info,
    vacuum,
)
from streams.delta.native import native_delta_available
from streams.delta.scd2 import apply_scd2, apply_scd2_arrow
from streams.delta.scd2_plan import SCD2_COLUMNS
from streams.delta.sink import file_entry, write_files
from streams.delta.target import (
    DEFAULT_TOMBSTONE_RETENTION_S,
    INTERNAL_COLUMNS,
    DeltaTarget,
    commit_properties,
)
from streams.delta.tombstones import TOMBSTONES_SUFFIX, tombstone_path

__all__ = [
    "DEFAULT_TOMBSTONE_RETENTION_S",
    "TOMBSTONES_SUFFIX",
    "tombstone_path",
    "INTERNAL_COLUMNS",
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
    "NativeDelta",
    "NativeEngineUnavailableError",
    "PythonDelta",
    "append_files",
    "apply_scd2",
    "apply_scd2_arrow",
    "arrow_schema",
    "batch_end_offsets",
    "checkpoint_query_id",
    "commit_properties",
    "committed",
    "crash_point",
    "delta_engine",
    "delta_source_engines",
    "file_entry",
    "file_writer",
    "latest_version",
    "local_path",
    "native_delta_available",
    "optimize",
    "read_delta_stream",
    "read_table",
    "recorded_offsets",
    "remove_interrupted_writes",
    "remove_orphans",
    "table_info",
    "vacuum",
    "write_batch",
    "write_files",
]
