"""The reasons `parse_kafka` gives a bad row of format `json` (its `_error`), as text.

`streams.kafka.parse_formats` builds them in Spark expressions; the landing path
(`streams.landing.arrow_json`) gives the same reasons for the records it knows are bad
without Spark. No Spark import: this runs inside Spark's Python workers too.
"""

from __future__ import annotations

NULL_VALUE = "value is null"
"""A record whose value is null."""
INVALID_JSON = "invalid JSON"
"""A value that is not JSON."""


def missing_required(name: str) -> str:
    """A record whose field `name`, required, is absent or null."""
    return f"missing required field `{name}`"
