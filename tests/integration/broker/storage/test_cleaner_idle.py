"""An idle compacted topic costs the cleaner nothing (Kafka's cleaner checkpoint and
`min.cleanable.dirty.ratio`).

The broker process's own I/O counter (`rchar` of `/proc/<pid>/io`: every byte its
read and pread calls returned) is the measure of work: after the topic's first
cleaning, many cleaner periods with no writes and no clients must read less than
one pass over the topic's segments would.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.support.broker_clients import consume_all, create_topic, produce

pytestmark = [pytest.mark.kafka]

CLEANER_PERIOD_MS = 100
KEYS = 2000
VALUE = b"v" * 1000


def _bytes_read(pid: int) -> int:
    text = Path(f"/proc/{pid}/io").read_text()
    match = re.search(r"^rchar: (\d+)$", text, re.MULTILINE)
    assert match is not None, text
    return int(match.group(1))


def _wait_for(path: Path, needle: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if needle in path.read_text(errors="replace"):
            return
        time.sleep(0.1)
    raise AssertionError(f"`{needle}` not in {path} after {timeout}s")


def _compact(bootstrap: str, topic: str) -> None:
    """Turn the topic's `cleanup.policy` to `compact` (IncrementalAlterConfigs)."""
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    entry = ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def test_an_idle_compacted_topic_is_not_cleaned_again(broker_factory, unique) -> None:
    proc = broker_factory(**{"log.cleaner.backoff.ms": CLEANER_PERIOD_MS})
    topic = unique("idle-compacted")
    # Written under `delete` first, then made `compact`: a cleaner pass in the middle of
    # the writes (a slow, busy machine) would clean the first keys alone, and the rest
    # would stay below `min.cleanable.dirty.ratio`, as in Kafka.
    create_topic(
        proc.bootstrap,
        topic,
        config={
            "cleanup.policy": "delete",
            "segment.bytes": str(64 * 1024),
            "min.compaction.lag.ms": "0",
        },
    )
    # every key once (about 2 MB that stays), the first hundred twice (what a pass
    # drops), then 300 more keys so the second values are not in the active segment
    records = [(b"key-%d" % i, VALUE) for i in range(KEYS)]
    records += [(b"key-%d" % i, b"newer") for i in range(100)]
    records += [(b"tail-%d" % i, VALUE) for i in range(300)]
    produce(proc.bootstrap, topic, records, batch_size=16 * 1024)  # segments of ~64 KiB
    _compact(proc.bootstrap, topic)
    _wait_for(proc.log_file, f"Log {topic}-0: compacted")
    survivors = consume_all(proc.bootstrap, topic, [0], expected=KEYS + 300, timeout=30)
    assert len({k for _, _, k, _ in survivors}) == KEYS + 300
    time.sleep(20 * CLEANER_PERIOD_MS / 1000)  # the first pass has ended

    before = _bytes_read(proc.pid)
    time.sleep(30 * CLEANER_PERIOD_MS / 1000)  # about 30 cleaner periods, nothing written
    read = _bytes_read(proc.pid) - before
    # one pass over the topic reads its ~2 MB; idle, the cleaner must not read it at all
    assert read < 256 * 1024, f"the broker read {read} bytes while the topic was idle"
