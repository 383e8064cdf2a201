"""Stream–table duality, tables out: a table's changes to compacted topics and back.

(CDC into tables is the Delta sink's work: SCD type 1 is its `upsert` mode, SCD type 2
its `scd2` mode, `streams.delta.scd2`.)

- `publish_changes`: a table's change feed to a compacted topic in Kafka transactions
  that also write the table's position to `<topic>.publish-position` (exactly-once for
  read_committed consumers);
  `Publisher` does the same again and again with its clients kept between calls;
  `published_position` reads where it stands, for readers beside it; `PositionReader`
  does it again and again with one consumer.
- `DeadLetters`: a quarantine table's rows as their original records, for a `Publisher`
  to a dead-letter topic (`DEAD_LETTER_TOPIC_CONFIG`), exactly once the same way.
- `read_ktable`: a compacted topic read back into a table (latest value per key).

See docs/cdc.md for the rules and guarantees, docs/architecture.md for the seams.
"""

from __future__ import annotations

from streams.cdc.changelog import changelog_records
from streams.cdc.deadletter import DEAD_LETTER_TOPIC_CONFIG, DeadLetters
from streams.cdc.errors import CdcError, KTableError, PublishError
from streams.cdc.ktable import latest_values, read_ktable
from streams.cdc.position import (
    Position,
    PositionReader,
    marker_group,
    position_topic,
    published_position,
    transactional_id,
)
from streams.cdc.publish import Publisher, PublishResult, publish_changes

__all__ = [
    "DEAD_LETTER_TOPIC_CONFIG",
    "CdcError",
    "DeadLetters",
    "KTableError",
    "Position",
    "PositionReader",
    "PublishError",
    "PublishResult",
    "Publisher",
    "changelog_records",
    "latest_values",
    "marker_group",
    "position_topic",
    "publish_changes",
    "published_position",
    "read_ktable",
    "transactional_id",
]
