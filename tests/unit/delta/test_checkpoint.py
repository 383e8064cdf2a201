"""Parsing Spark's checkpoint files (written here in Spark's exact layout), and removing
what a killed query left half-written in them."""

from __future__ import annotations

import json
from pathlib import Path

from streams.delta import (
    batch_end_offsets,
    checkpoint_query_id,
    delta_source_engines,
    remove_interrupted_writes,
)

META = '{"batchWatermarkMs":0,"batchTimestampMs":1700000000000,"conf":{}}'


def _offsets(ckpt: Path, batch: int, *sources: str) -> None:
    (ckpt / "offsets").mkdir(parents=True, exist_ok=True)
    (ckpt / "offsets" / str(batch)).write_text("\n".join(["v1", META, *sources]))


def test_query_id_is_read_from_metadata(tmp_path: Path) -> None:
    assert checkpoint_query_id(tmp_path) is None
    (tmp_path / "metadata").write_text('{"id":"5f0e0c4e-1111-2222-3333-444455556666"}')
    assert checkpoint_query_id(tmp_path) == "5f0e0c4e-1111-2222-3333-444455556666"


def test_one_source_gives_its_offset(tmp_path: Path) -> None:
    _offsets(tmp_path, 3, json.dumps({"orders": {"0": 42, "1": 7}}))
    assert batch_end_offsets(tmp_path, 3) == {"orders": {"0": 42, "1": 7}}
    assert batch_end_offsets(tmp_path, 4) is None


def test_several_sources_keep_their_order_and_missing_ones(tmp_path: Path) -> None:
    _offsets(tmp_path, 0, '{"version": 3}', "-")
    assert batch_end_offsets(tmp_path, 0) == {"sources": [{"version": 3}, None]}


def test_a_file_without_version_line_is_ignored(tmp_path: Path) -> None:
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "0").write_text("garbage")
    assert batch_end_offsets(tmp_path, 0) is None


def test_only_the_temporary_files_of_interrupted_writes_go(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    (ckpt / "offsets").mkdir(parents=True)
    (ckpt / "commits").mkdir()
    (ckpt / "metadata").write_text('{"id":"q"}\n')
    kept = [ckpt / "offsets" / "0", ckpt / "offsets" / ".0.crc", ckpt / "commits" / "0"]
    for f in kept:
        f.write_text("v1\n")
    # What a SIGKILL during Spark's write-then-rename of offsets/1 and commits/1 leaves.
    partial = [
        ckpt / "offsets" / ".1.5b1c.tmp",
        ckpt / "offsets" / "..1.5b1c.tmp.crc",
        ckpt / "commits" / ".1.77aa.tmp",
    ]
    for f in partial:
        f.write_text("")
    assert sorted(remove_interrupted_writes(ckpt)) == sorted(str(f) for f in partial)
    assert all(f.exists() for f in kept)
    assert not any(f.exists() for f in partial)
    assert remove_interrupted_writes(ckpt) == []
    assert remove_interrupted_writes(tmp_path / "never-started") == []


NATIVE = (
    '{"sourceVersion":1,"reservoirId":"971a6f96-bfc4-4e19-8c9f-8159a49c52b5",'
    '"reservoirVersion":4,"index":-1,"isStartingVersion":false}'
)


def test_the_delta_engine_of_a_checkpoint_is_read_from_its_latest_offsets(tmp_path: Path) -> None:
    assert delta_source_engines(tmp_path) == set()  # never started
    _offsets(tmp_path, 0, '{"version": 2}')
    _offsets(tmp_path, 1, NATIVE)
    assert delta_source_engines(tmp_path) == {"native"}  # the latest batch, not the first
    _offsets(tmp_path, 2, '{"version": 5}', "-")
    assert delta_source_engines(tmp_path) == {"python"}
    _offsets(tmp_path, 3, '{"version": 6, "table": "9a1c"}')  # with the table's id
    assert delta_source_engines(tmp_path) == {"python"}


def test_kafka_offsets_name_no_delta_engine_even_for_a_topic_named_version(
    tmp_path: Path,
) -> None:
    _offsets(tmp_path, 0, '{"version": {"0": 3}}', '{"orders": {"0": 42}}')
    assert delta_source_engines(tmp_path) == set()
