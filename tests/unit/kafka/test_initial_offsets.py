"""The Kafka source's initial offsets under the checkpoint: written once, read back."""

from __future__ import annotations

from pathlib import Path

import pytest

from streams.kafka.errors import KafkaConfigError
from streams.kafka.initial_offsets import InitialOffsetsLog


def test_nothing_recorded_reads_none(tmp_path: Path) -> None:
    assert InitialOffsetsLog(tmp_path, "topics=a").read() is None


def test_recorded_offsets_read_back_per_subscription(tmp_path: Path) -> None:
    log = InitialOffsetsLog(tmp_path, "topics=a")
    log.write({"a": {"0": 5, "1": 7}})
    assert InitialOffsetsLog(tmp_path, "topics=a").read() == {"a": {"0": 5, "1": 7}}
    assert InitialOffsetsLog(tmp_path, "topics=b").read() is None
    path = Path(log.path)
    assert path.parent == tmp_path / "sources" / "warehouse_kafka"
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left


def test_unreadable_record_names_the_file(tmp_path: Path) -> None:
    log = InitialOffsetsLog(tmp_path, "topics=a")
    Path(log.path).parent.mkdir(parents=True)
    Path(log.path).write_text("{not json")
    with pytest.raises(KafkaConfigError, match="initial offsets at `.*json`"):
        log.read()
