"""The Kafka source's initial offsets under the checkpoint: written once, read back."""

from __future__ import annotations

from pathlib import Path

import pytest

from streams.kafka.errors import KafkaConfigError
from streams.kafka.initial_offsets import (
    InitialOffsetsLog,
    record_initial_offsets,
    recorded_federation_initial_offsets,
    subscription_text,
)


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


def test_a_federations_sources_keep_their_initial_offsets_apart(tmp_path: Path) -> None:
    """Each cluster's source of a federation records its own, on either engine: the
    Python source's log keyed by the cluster, Spark's `sources/<index>/0`."""
    record_initial_offsets(
        tmp_path, {"t": {"0": 3}}, topics=["t"], pattern=None, cluster="eu", index=1
    )
    assert (
        recorded_federation_initial_offsets(
            tmp_path, clusters=["default", "eu"], topics=["t"], pattern=None
        )
        is None
    ), "the `default` source recorded nothing yet"
    record_initial_offsets(
        tmp_path, {"t": {"0": 5}}, topics=["t"], pattern=None, cluster="default", index=0
    )
    got = recorded_federation_initial_offsets(
        tmp_path, clusters=["default", "eu"], topics=["t"], pattern=None
    )
    assert got == {"sources": [{"t": {"0": 5}}, {"t": {"0": 3}}]}
    assert subscription_text(["t"], None, cluster="eu") == "cluster=eu;topics=t"
    assert subscription_text(["t"], None) == "topics=t"
    # Spark's own source's files alone (the native engine) read back by index.
    spark_only = tmp_path / "native"
    for index, offset in enumerate((7, 9)):
        folder = spark_only / "sources" / str(index)
        folder.mkdir(parents=True)
        (folder / "0").write_bytes(b"\x00v1\n" + f'{{"t":{{"0":{offset}}}}}'.encode())
    got = recorded_federation_initial_offsets(
        spark_only, clusters=["default", "eu"], topics=["t"], pattern=None
    )
    assert got == {"sources": [{"t": {"0": 7}}, {"t": {"0": 9}}]}
