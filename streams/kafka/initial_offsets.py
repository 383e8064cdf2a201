"""The Kafka source's resolved initial offsets, kept under the query's checkpoint.

Spark asks a source for its initial offset whenever the checkpoint has no committed
batch: at the first start, and again when a query restarts after Spark wrote the
offsets of batch 0 but before batch 0 committed (Spark then replays batch 0 from the
initial offset to the end offset it logged). `latest`, `earliest` and timestamps
resolve to different offsets at each call, so a restart would plan batch 0 from a
new start and skip (or repeat) records. Spark's own Kafka source writes the first
resolution to `<checkpoint>/sources/<n>/0` and reuses it; this log does the same
for the Python source at `<checkpoint>/sources/warehouse_kafka/<subscription>.json`,
one file per subscription (topics or pattern), written once, atomically.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import streams.storage as storage
from streams.kafka.errors import KafkaConfigError
from streams.kafka.offsets import from_json_dict, to_json_dict

logger = logging.getLogger(__name__)

FOLDER = ("sources", "warehouse_kafka")


class InitialOffsetsLog:
    """The initial offsets of one subscription (`topics` or `pattern` text) of a query.

    Concurrency: written once by Spark's planner (one thread per query); the write is a
    rename on a local disk and one put on object storage, so a reader sees the whole
    file or none.
    """

    def __init__(self, checkpoint: str | Path, subscription: str) -> None:
        digest = hashlib.sha1(subscription.encode()).hexdigest()[:16]
        self.subscription = subscription
        self.path = storage.join(str(checkpoint), *FOLDER, f"{digest}.json")

    def read(self) -> dict[str, dict[str, int]] | None:
        """The offsets written earlier (`{"topic": {"0": 42}}`), or None if none were."""
        try:
            text = storage.read_text(self.path)
            if text is None:
                return None
            data = json.loads(text)
        except (OSError, json.JSONDecodeError) as e:
            raise KafkaConfigError(
                f"The Kafka source's initial offsets at `{self.path}` cannot be read: {e}. "
                "Delete the file to resolve `starting_offsets` again (records may be "
                "skipped or repeated), or reset the query's checkpoint.",
                option="checkpoint_location",
            ) from e
        return to_json_dict(from_json_dict(data.get("offsets")))

    def write(self, offsets: dict[str, dict[str, int]]) -> None:
        """Record `offsets` as this subscription's initial offsets, whole."""
        body = json.dumps({"subscription": self.subscription, "offsets": offsets}, sort_keys=True)
        storage.write_text(self.path, body)
        logger.info("kafka source: initial offsets %s recorded in %s", offsets, self.path)
