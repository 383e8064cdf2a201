"""A query starting at `latest`, SIGKILLed after Spark logged the offsets of batch 0 and
before batch 0 committed, loses and repeats nothing when it restarts after more records
arrived: the restart replays batch 0 from the initial offsets the first life resolved,
not from a new `latest` (docs/architecture.md "Exactly-once").

Batch 0 of a `latest` start holds the records that arrived between the source's answer
to "initial offset" and to "latest offset" in the query's first trigger, so a producer
writes all the while the first life starts; a life whose batch 0 caught none is tried
again (the scenario is then not the one under test).
"""

from __future__ import annotations

import json
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError
from confluent_kafka import Producer as KafkaProducer

from streams.delta import batch_end_offsets
from streams.kafka.admin import end_offsets, ensure_topic, produce
from tests.integration.crash.scenario import (
    DRAIN_TIMEOUT_S,
    LIFE_TIMEOUT_S,
    Child,
    _coordinates,
    _records,
)

pytestmark = [pytest.mark.slow, pytest.mark.kafka, pytest.mark.spark, pytest.mark.timeout(1800)]

ATTEMPTS = 4
# One record every 2 ms: a few hundred a second, whatever the child's start-up takes.
PACE_S = 0.002


def _ends(bootstrap: str, topic: str) -> dict[int, int]:
    return {int(p): o for p, o in end_offsets(bootstrap, [topic])[topic].items()}


def _initial_offsets(ckpt: Path, engine: str, topic: str) -> dict[int, int]:
    """What the source recorded as its start: the Python source's JSON file, or Spark's
    own Kafka source's `sources/0/0` (a version line, then the offsets as JSON)."""
    if engine == "python":
        files = list((ckpt / "sources" / "warehouse_kafka").glob("*.json"))
        assert len(files) == 1, f"expected one initial-offsets file, found {files}"
        offsets = json.loads(files[0].read_text())["offsets"]
    else:
        text = (ckpt / "sources" / "0" / "0").read_text(errors="replace")
        offsets = json.loads(text[text.index("{") :])
    return {int(p): o for p, o in offsets[topic].items()}


class Producer:
    """Writes one record to `topic` every PACE_S from a thread, from the moment it is
    made (before the child is launched) until the child's log says batch 0 was planned
    (what comes later is batch 1's), or until stopped.

    One long-lived producer without linger keeps the topic growing through the whole
    first trigger, so the moment between the source's "initial offset" and "latest
    offset" answers sees records arrive however fast or slow the machine is. A producer
    per chunk, started once the query runs, left gaps of tens of milliseconds and could
    begin after the first trigger was already planned."""

    def __init__(self, bootstrap: str, topic: str, first: int, log: Path) -> None:
        self.next = first
        self.errors: list[str] = []
        self._log = log
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(bootstrap, topic), daemon=True)
        self._thread.start()

    def _planned(self) -> bool:
        return self._log.is_file() and "batch 0: foreachBatch" in self._log.read_text(
            errors="replace"
        )

    def _delivered(self, err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            self.errors.append(err.str())

    def _run(self, bootstrap: str, topic: str) -> None:
        producer = KafkaProducer(
            {"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": False}
        )
        checked = time.monotonic()
        try:
            while not self._stop.wait(PACE_S):
                ((key, value),) = _records(self.next, 1)
                producer.produce(topic, key=key, value=value, on_delivery=self._delivered)
                producer.poll(0)
                self.next += 1
                if time.monotonic() - checked > 0.1:
                    checked = time.monotonic()
                    if self._planned():
                        return
        finally:
            left = producer.flush(60)
            if left:
                self.errors.append(f"{left} record(s) still unsent after 60 s")

    def stop(self) -> int:
        """Stops producing; returns the number of the next record. Fails the test if any
        record was not acknowledged (the expected offsets would then be wrong)."""
        self._stop.set()
        self._thread.join()
        assert not self.errors, f"records not delivered: {self.errors[:5]}"
        return self.next


def test_kill_before_batch_zero_commits_keeps_the_latest_start(
    broker, unique, tmp_path: Path, engine: str
) -> None:
    topic = unique("first-batch")
    ensure_topic(broker.bootstrap, topic, partitions=2)
    n = 100  # records before the start: `latest` leaves them out
    assert produce(broker.bootstrap, topic, _records(0, n)) == n
    for attempt in range(ATTEMPTS):
        run = tmp_path / f"try-{attempt}"
        shutil.rmtree(run, ignore_errors=True)
        run.mkdir()
        params = {
            "bootstrap": broker.bootstrap,
            "topic": topic,
            "checkpoint": str(run / "ckpt"),
            "append_path": str(run / "events"),
            "upsert_path": str(run / "latest"),
            "arrow_path": str(run / "arrow"),
            "scd2_path": str(run / "history"),
            "max_offsets_per_trigger": 100_000,
            "engine": engine,
            "starting_offsets": "latest",
        }
        before = _ends(broker.bootstrap, topic)
        log = run / "first.log"
        producer = Producer(broker.bootstrap, topic, n, log)
        # The first Delta commit of batch 0 kills the child.
        first = Child({**params, "continuous": True}, log, "before_commit", 1.0)
        rc = first.wait(LIFE_TIMEOUT_S)
        n = producer.stop()
        assert rc == -signal.SIGKILL, f"first life exited {rc}:\n{log.read_text()[-4000:]}"
        ckpt = Path(params["checkpoint"])
        assert not (ckpt / "commits" / "0").exists(), "batch 0 committed before the kill"
        batch0 = batch_end_offsets(ckpt, 0)
        assert batch0 is not None, "the kill came before Spark logged batch 0"
        initial = _initial_offsets(ckpt, engine, topic)
        assert all(before[p] <= initial[p] for p in before), (before, initial)
        if any(int(o) > initial[int(p)] for p, o in batch0[topic].items()):
            break
    else:
        pytest.fail(f"batch 0 caught no record in {ATTEMPTS} first lives")

    # The restart's `latest` would be past these.
    assert produce(broker.bootstrap, topic, _records(n, 150)) == 150
    log = run / "restart.log"
    rc = Child(params, log, None, 0).wait(DRAIN_TIMEOUT_S)
    assert rc == 0, f"restart exited {rc}:\n{log.read_text()[-4000:]}"

    ends = _ends(broker.bootstrap, topic)
    expected = sorted((topic, p, o) for p, end in ends.items() for o in range(initial[p], end))
    assert _coordinates(params["append_path"]) == expected
