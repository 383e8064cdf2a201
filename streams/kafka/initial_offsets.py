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

`record_initial_offsets` writes both engines' files for a checkpoint rebuilt by
`warehouse recover` whose batch 0 is to be replayed, and `recorded_initial_offsets`
reads back whichever the query's source wrote (batch 0's start, for its commit info).
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
SPARK_LOG = ("sources", "0", "0")
"""Spark's Kafka source's initial offsets (its `KafkaSourceInitialOffsetWriter`, the only
source of a query: index 0): a zero byte, `v1`, a newline, the offsets' JSON."""


def subscription_text(
    topics: list[str] | None, pattern: str | None, *, cluster: str | None = None
) -> str:
    """What the Python source keys its initial offsets by: `topics=a,b` or `pattern=...`,
    and `cluster=eu;` before it for one of a federation's sources (each its own)."""
    text = f"topics={','.join(topics)}" if topics else f"pattern={pattern}"
    return f"cluster={cluster};{text}" if cluster else text


def record_initial_offsets(
    checkpoint: str | Path,
    offsets: dict[str, dict[str, int]],
    *,
    topics: list[str] | None,
    pattern: str | None,
    cluster: str | None = None,
    index: int = 0,
) -> None:
    """Record `offsets` as the initial offsets of the query's Kafka source on either
    engine: the Python source's log and Spark's `sources/<index>/0`, each read only by its
    own source when batch 0 is planned or replayed. `cluster`, `index`: one of a
    federation's sources, the query's `index`th, reading `cluster`."""
    subscription = subscription_text(topics, pattern, cluster=cluster)
    InitialOffsetsLog(checkpoint, subscription).write(offsets)
    body = json.dumps(to_json_dict(from_json_dict(offsets)), separators=(",", ":"))
    spark_log = storage.join(str(checkpoint), "sources", str(int(index)), "0")
    storage.write_bytes(spark_log, b"\x00v1\n" + body.encode())


def recorded_federation_initial_offsets(
    checkpoint: str | Path,
    *,
    clusters: list[str],
    topics: list[str] | None,
    pattern: str | None,
) -> dict[str, list] | None:
    """The initial offsets of a federation's sources (one per cluster, in `clusters`'
    order, the query's source order), as `{"sources": [offsets, ...]}` like the offset
    log of a several-source query; None when some source recorded none. Each source's:
    the Python source's log for that cluster, else Spark's `sources/<index>/0`."""
    found: list = []
    for index, cluster in enumerate(clusters):
        subscription = subscription_text(topics, pattern, cluster=cluster)
        offsets = InitialOffsetsLog(checkpoint, subscription).read()
        if offsets is None:
            offsets = _spark_initial(storage.join(str(checkpoint), "sources", str(index), "0"))
        if offsets is None:
            return None
        found.append(offsets)
    return {"sources": found}


def _spark_initial(path: str) -> dict[str, dict[str, int]] | None:
    raw = storage.read_bytes(path)
    if raw is None:
        return None
    version, _, body = raw.lstrip(b"\x00").decode().partition("\n")
    if version != "v1" or not body.startswith("{"):
        return None
    return to_json_dict(from_json_dict(json.loads(body)))


def recorded_initial_offsets(checkpoint: str | Path) -> dict[str, dict[str, int]] | None:
    """The initial offsets the query's Kafka source recorded under `checkpoint` (the Python
    source's log, else Spark's), or None when it recorded none (a checkpoint of a query
    that read no Kafka topic, or that has not planned batch 0)."""
    # One file per subscription the query has had: the newest is the one it reads.
    folder = storage.join(str(checkpoint), *FOLDER)
    ours = sorted(
        (mtime, rel) for rel, mtime in storage.walk_file_times(folder) if rel.endswith(".json")
    )
    if ours:
        data = json.loads(storage.read_text(storage.join(folder, ours[-1][1])) or "{}")
        return to_json_dict(from_json_dict(data.get("offsets")))
    return _spark_initial(storage.join(str(checkpoint), *SPARK_LOG))


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
