"""Delta side of the streaming I/O: the idempotent sink, the stream source, maintenance.

See docs/architecture.md (`streams.delta`) for the contract the runtime builds on.
"""

from __future__ import annotations

from streams.delta.checkpoint import batch_end_offsets, checkpoint_query_id
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
from streams.delta.sink import committed, write_batch
from streams.delta.source import read_delta_stream
from streams.delta.target import INTERNAL_COLUMNS, DeltaTarget, commit_properties

__all__ = [
    "INTERNAL_COLUMNS",
    "DeltaConfigError",
    "DeltaReadError",
    "DeltaSchemaError",
    "DeltaStreamError",
    "DeltaTableNotFoundError",
    "DeltaTarget",
    "DeltaWriteError",
    "NativeEngineUnavailableError",
    "batch_end_offsets",
    "checkpoint_query_id",
    "commit_properties",
    "committed",
    "native_delta_available",
    "optimize",
    "read_delta_stream",
    "recorded_offsets",
    "remove_orphans",
    "table_info",
    "vacuum",
    "write_batch",
]
