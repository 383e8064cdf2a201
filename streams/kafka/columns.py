"""The names of Kafka record columns, shared by Spark code and Arrow code.

No Spark import: the Arrow parse (`streams.landing.arrow_json`) runs inside Spark's
Python workers and needs these names without pulling Spark in.
"""

from __future__ import annotations

KAFKA_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp")
"""What `parse_kafka` reads of the source's columns (and what a record handed back to
Spark's parse keeps)."""

COORDINATES = ("_topic", "_partition", "_offset", "_timestamp")
"""The Kafka coordinates a parsed row carries: `_` + the source column each comes from."""
