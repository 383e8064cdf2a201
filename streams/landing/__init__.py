"""Landing Kafka JSON in Delta through Arrow: read, parse and write without a JVM row.

Above both `streams.kafka` (the planned input partitions, the source's reader) and
`streams.delta` (the Arrow file writer, the add-files commit); neither imports it.

- `planned_partitions(df)`: the Kafka ranges Spark planned for a micro-batch;
- `arrow_payload(payload)`: the Arrow schema of a payload, or None when this path
  does not apply to it;
- `kafka_json_append(...)`: one batch appended through Arrow, with Spark's parse for
  the records Arrow hands back (`KafkaJsonAppend` says what it did);
- `landing_blocker(spark, path)`: why this path cannot run for a table from a session
  (its tasks cannot import it or write there, delta-rs does not write the table), or
  None; `warm_up(spark, path, ...)`: a job in the background that starts Spark's Python
  workers and the path's imports before a table's first batch (`streams.landing.reach`);
- `RowRules`, `RowVerdict`: rows judged in the Arrow tasks before they are written
  (`streams.landing.rules`; the framework's expectations implement `RowRules`);
- `BadRecords`: the quarantine rows the tasks write for the records they know are bad
  (`streams.landing.rules`; the framework's quarantine implements it);
- `payload_schema`, `split_block`: the Arrow parse itself (`streams.landing.arrow_json`);
- errors (`streams.landing.errors`): `LandingError` (root, `.table`, `.path`),
  `LandingConfigError` (`.field`).
"""

from __future__ import annotations

from streams.landing.arrow_json import BAD_COLUMNS, ArrowParse, payload_schema, split_block
from streams.landing.errors import LandingConfigError, LandingError
from streams.landing.kafka_json import KafkaJsonAppend, arrow_payload, kafka_json_append
from streams.landing.planned import planned_partitions
from streams.landing.reach import WarmUp, landing_blocker, warm_up
from streams.landing.rules import BadRecords, RowRules, RowVerdict

__all__ = [
    "BAD_COLUMNS",
    "ArrowParse",
    "BadRecords",
    "KafkaJsonAppend",
    "LandingConfigError",
    "LandingError",
    "RowRules",
    "RowVerdict",
    "WarmUp",
    "arrow_payload",
    "kafka_json_append",
    "landing_blocker",
    "payload_schema",
    "planned_partitions",
    "split_block",
    "warm_up",
]
