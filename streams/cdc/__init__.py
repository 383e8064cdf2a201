"""Stream–table duality: CDC into tables (SCD1/SCD2) and tables out to compacted topics.

- `apply_scd2`: the SCD type 2 apply behind `write_batch(..., DeltaTarget(mode="scd2"))`
  (SCD type 1 is the Delta sink's `upsert` mode).
- `publish_changes`: a table's change feed to a compacted topic, one Kafka transaction
  per call with a committed marker (exactly-once for read_committed consumers).
- `read_ktable`: a compacted topic read back into a table (latest value per key).

See docs/cdc.md for the rules and guarantees, docs/architecture.md for the seams.
"""

from __future__ import annotations

from streams.cdc.errors import CdcError, KTableError, PublishError
from streams.cdc.ktable import latest_values, read_ktable
from streams.cdc.publish import (
    PublishResult,
    changelog_records,
    marker_group,
    publish_changes,
    transactional_id,
)
from streams.cdc.scd2 import SCD2_COLUMNS, apply_scd2, apply_scd2_arrow

__all__ = [
    "SCD2_COLUMNS",
    "CdcError",
    "KTableError",
    "PublishError",
    "PublishResult",
    "apply_scd2",
    "apply_scd2_arrow",
    "changelog_records",
    "latest_values",
    "marker_group",
    "publish_changes",
    "read_ktable",
    "transactional_id",
]
