"""LogManager: topics persisted across restarts, name validation, configs, flush, retention."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streams.broker.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidTopicError,
    OffsetOutOfRangeError,
    TopicAlreadyExistsError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from streams.broker.storage import (
    LogConfig,
    LogManager,
    validate_topic_name,
)
from tests.unit.broker.storage.encoder import kafka_python_records, value_batch


@pytest.mark.parametrize(
    "name",
    [
        "",
        ".",
        "..",
        "../etc",
        "a/b",
        "/abs",
        "a\\b",
        "x" * 250,
        "naïve",
        "a b",
        "a\x00b",
        "..\\x",
        42,
    ],
)
def test_illegal_topic_names_are_rejected(tmp_path: Path, name: object) -> None:
    with pytest.raises(InvalidTopicError) as err:
        validate_topic_name(name)
    assert "Topic name" in str(err.value)
    with LogManager(tmp_path / "data") as logs, pytest.raises(InvalidTopicError):
        logs.create_topic(name, 1)  # type: ignore[arg-type]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]
    assert [p.name for p in (tmp_path / "data").iterdir()] == []


@pytest.mark.parametrize("name", ["orders", "a.b_c-D9", "__consumer_offsets", "x" * 249, "..."])
def test_legal_topic_names(name: str) -> None:
    assert validate_topic_name(name) == name


def test_topics_survive_a_restart(tmp_path: Path) -> None:
    with LogManager(tmp_path) as logs:
        meta = logs.create_topic("orders", 3, {"retention.ms": "1000", "cleanup.policy": "compact"})
        logs.create_topic("__consumer_offsets", 1, {"cleanup.policy": "compact"}, internal=True)
        logs.get_log("orders", 2).append(value_batch(4))
        logs.add_partitions("orders", 5)
        logs.alter_topic_config("orders", {"retention.ms": None, "segment.bytes": "100000"})
        with pytest.raises(TopicAlreadyExistsError):
            logs.create_topic("orders", 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["topics.json", "__consumer_offsets-0"] + [f"orders-{i}" for i in range(5)]
    )
    with LogManager(tmp_path) as logs:
        topics = logs.topics()
        assert topics["orders"].partitions == 5 and topics["orders"].topic_id == meta.topic_id
        assert topics["orders"].configs == {"cleanup.policy": "compact", "segment.bytes": "100000"}
        assert topics["__consumer_offsets"].internal
        config = logs.topic_config("orders")
        assert (config.retention_ms, config.segment_bytes, config.compact) == (
            LogConfig().retention_ms,
            100000,
            True,
        )
        assert logs.get_log("orders", 4).config == config
        log = logs.get_log("orders", 2)
        assert log.log_end_offset == 4
        assert [r[0] for r in kafka_python_records(log.read(0, 10**6))] == [0, 1, 2, 3]
        logs.delete_topic("orders")
        with pytest.raises(UnknownTopicOrPartitionError, match="orders-0"):
            logs.get_log("orders", 0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["__consumer_offsets-0", "topics.json"]
    with LogManager(tmp_path) as logs:
        assert list(logs.topics()) == ["__consumer_offsets"]


def test_bad_requests_name_the_problem(tmp_path: Path) -> None:
    with LogManager(tmp_path) as logs:
        with pytest.raises(InvalidConfigError, match="`retention.ms` must be an integer") as err:
            logs.create_topic("t", 1, {"retention.ms": "soon"})
        assert err.value.key == "retention.ms"
        with pytest.raises(InvalidConfigError, match="Unknown topic config `retention.msx`"):
            logs.create_topic("t", 1, {"retention.msx": "1"})
        with pytest.raises(InvalidConfigError, match="cleanup.policy"):
            logs.create_topic("t", 1, {"cleanup.policy": "forever"})
        with pytest.raises(InvalidPartitionsError):
            logs.create_topic("t", 0)
        assert logs.topics() == {}
        logs.create_topic("t", 2)
        with pytest.raises(InvalidPartitionsError, match="can only be added"):
            logs.add_partitions("t", 2)
        with pytest.raises(InvalidConfigError, match="segment.bytes"):
            logs.alter_topic_config("t", {"segment.bytes": "1"})
        with pytest.raises(UnknownTopicOrPartitionError):
            logs.alter_topic_config("nope", {})


def test_config_parsing() -> None:
    config = LogConfig.from_kafka({"cleanup.policy": "delete,compact", "flush.messages": "1"})
    assert config.cleanup_policy == "compact,delete" and config.compact and config.delete
    assert LogConfig.from_kafka(config.to_kafka()) == config
    assert config.overrides(LogConfig()) == {
        "cleanup.policy": "compact,delete",
        "flush.messages": "1",
    }
    with pytest.raises(InvalidConfigError, match="durability"):
        LogConfig.from_kafka({"durability": "maybe"})
    with pytest.raises(InvalidConfigError, match="between"):
        LogConfig(retention_ms=-5)


def test_unreadable_topics_file_is_reported(tmp_path: Path) -> None:
    (tmp_path / "topics.json").write_text("{not json")
    with pytest.raises(UnknownServerError, match="topics.json` is unreadable"):
        LogManager(tmp_path).load()


def test_flush_dirty_and_flush_due(tmp_path: Path) -> None:
    now = [1_000_000]
    logs = LogManager(tmp_path, clock=lambda: now[0]).load()
    logs.create_topic("sync", 1, {"durability": "sync"})
    logs.create_topic("lazy", 1, {"flush.ms": "500"})
    logs.create_topic("count", 1, {"flush.messages": "3"})
    for t in ("sync", "lazy", "count"):
        logs.get_log(t, 0).append(value_batch(2))
    assert logs.get_log("sync", 0).high_watermark == 0
    assert logs.flush_due(now[0]) == 1  # only durability=sync is due
    assert logs.get_log("sync", 0).high_watermark == 2
    logs.get_log("count", 0).append(value_batch(1))
    assert logs.flush_due(now[0]) == 1  # flush.messages reached
    assert logs.flush_due(now[0] + 500) == 1  # flush.ms elapsed for "lazy"
    assert logs.flush_dirty() == 0
    logs.get_log("lazy", 0).append(value_batch(1))
    assert logs.flush_dirty() == 1
    logs.close()


def test_retention_by_time_and_size(tmp_path: Path) -> None:
    batch = value_batch(5, size=200, ts=0)
    seg = len(batch) * 2
    with LogManager(tmp_path) as logs:
        logs.create_topic("by-time", 1, {"segment.bytes": str(seg), "retention.ms": "10000"})
        logs.create_topic(
            "by-size",
            1,
            {"segment.bytes": str(seg), "retention.bytes": str(seg * 2), "retention.ms": "-1"},
        )
        logs.create_topic("kept", 1, {"segment.bytes": str(seg), "cleanup.policy": "compact"})
        for t in ("by-time", "by-size", "kept"):
            log = logs.get_log(t, 0)
            for i in range(10):
                log.append(value_batch(5, size=200, ts=i * 1000))
            assert len(log.segments) == 5
        # Batches have timestamps 0..9000 (two per segment); at 15_500 segments with
        # max timestamp < 5_500 are expired: the first three.
        assert logs.run_retention(15_500) == 3 + 3
        by_time = logs.get_log("by-time", 0)
        assert (by_time.log_start_offset, len(by_time.segments)) == (30, 2)
        with pytest.raises(OffsetOutOfRangeError):
            by_time.read(29, 100)
        by_size = logs.get_log("by-size", 0)
        assert (by_size.log_start_offset, by_size.size_bytes) == (30, seg * 2)
        assert len(logs.get_log("kept", 0).segments) == 5
        # Everything expired: the active segment is rolled and deleted too.
        assert logs.run_retention(10**9) >= 2
        assert by_time.log_start_offset == by_time.log_end_offset == 50
        assert by_time.read(50, 100) == b""
    with LogManager(tmp_path) as logs:
        assert logs.get_log("by-time", 0).log_start_offset == 50
        assert logs.get_log("by-size", 0).log_start_offset == 30


def test_topics_file_is_plain_json(tmp_path: Path) -> None:
    with LogManager(tmp_path) as logs:
        logs.create_topic("t", 2, {"retention.ms": "5"})
    raw = json.loads((tmp_path / "topics.json").read_text())
    assert raw["topics"][0]["name"] == "t" and raw["topics"][0]["configs"] == {"retention.ms": "5"}


def test_a_recreated_topic_starts_empty_even_over_a_stale_directory(tmp_path: Path) -> None:
    with LogManager(tmp_path) as logs:
        logs.create_topic("t", 1)
        logs.get_log("t", 0).append(value_batch(3))
    stale = tmp_path / "t-0"
    saved = tmp_path / "saved"
    stale.rename(saved)
    with LogManager(tmp_path) as logs:
        logs.delete_topic("t")
        saved.rename(stale)  # as if a crash kept the directory after the deletion was persisted
        logs.create_topic("t", 2)
        assert logs.get_log("t", 0).log_end_offset == 0
        logs.get_log("t", 1).append(value_batch(1))
        logs.add_partitions("t", 3)
        assert logs.get_log("t", 2).log_end_offset == 0
