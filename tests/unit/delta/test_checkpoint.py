"""Parsing Spark's checkpoint files (written here in Spark's exact layout), and removing
what a killed query left half-written in them."""

from __future__ import annotations

import json
from pathlib import Path

from streams.delta import (
    batch_end_offsets,
    checkpoint_query_id,
    delta_source_engines,
    delta_source_position,
    remove_interrupted_writes,
    write_replay_checkpoint,
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


def test_a_replay_checkpoint_reads_back_as_spark_left_it(tmp_path: Path) -> None:
    """`write_replay_checkpoint`: the query id, batch `b - 1` logged and committed, batch
    `b` logged only (replayed next); or, `committed`, batch `b` done."""
    ckpt = tmp_path / "c"
    write_replay_checkpoint(
        ckpt, query_id="q1", batch_id=4, start={"t": {"0": 5}}, end={"t": {"0": 9}}
    )
    assert checkpoint_query_id(ckpt) == "q1"
    assert batch_end_offsets(ckpt, 3) == {"t": {"0": 5}}
    assert batch_end_offsets(ckpt, 4) == {"t": {"0": 9}}
    assert sorted(p.name for p in (ckpt / "commits").iterdir()) == ["3"]
    done = tmp_path / "d"
    write_replay_checkpoint(
        done, query_id="q2", batch_id=0, start=None, end={"t": {"0": 9}}, committed=True
    )
    assert sorted(p.name for p in (done / "commits").iterdir()) == ["0"]


def test_a_replay_checkpoint_of_several_sources_has_a_line_each(tmp_path: Path) -> None:
    """A federated query's sources (one per cluster) each get their line, in order."""
    ckpt = tmp_path / "c"
    start = {"sources": [{"t": {"0": 5}}, {"t": {"0": 2}}]}
    end = {"sources": [{"t": {"0": 9}}, {"t": {"0": 4}}]}
    write_replay_checkpoint(ckpt, query_id="q1", batch_id=1, start=start, end=end)
    assert batch_end_offsets(ckpt, 0) == start
    assert batch_end_offsets(ckpt, 1) == end
    # Without the replaced checkpoint, the settings given (Spark 4.2 needs the shuffle
    # partitions of the last two batches to replay the newest).
    written = tmp_path / "s"
    settings = {"spark.sql.shuffle.partitions": "4"}
    write_replay_checkpoint(
        written, query_id="q", batch_id=1, start=start, end=end, settings=settings
    )
    for batch in ("0", "1"):
        meta = json.loads((written / "offsets" / batch).read_text().splitlines()[1])
        assert meta["conf"] == settings
    assert (ckpt / "offsets" / "1").read_text().splitlines()[2:] == [
        '{"t": {"0": 9}}',
        '{"t": {"0": 4}}',
    ]


def test_a_readers_position_in_a_table_by_either_engines_offsets(tmp_path: Path) -> None:
    """The first version a reader still reads of the table `tid`: the Python source's
    `version` is the last one read; delta-spark's `reservoirVersion` the one it is in. A
    batch 0 not committed reads from the start (the Python source, and delta-spark's
    started at a version, from version 0)."""
    python, native = tmp_path / "p", tmp_path / "n"
    assert delta_source_position(python, "tid") is None
    _offsets(python, 0, '{"version": 3, "table": "tid"}')
    assert delta_source_position(python, "tid") == 0
    (python / "commits").mkdir()
    (python / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}')
    assert delta_source_position(python, "tid") == 4
    assert delta_source_position(python, "other") is None
    native_offset = '{"sourceVersion":1,"reservoirId":"tid","reservoirVersion":%d,"index":-1}'
    _offsets(native, 0, native_offset % 2)
    assert delta_source_position(native, "tid") == 2
    _offsets(native, 1, native_offset % 6, '{"version": 1, "table": "tid"}')
    (native / "commits").mkdir()
    (native / "commits" / "1").write_text('v1\n{"nextBatchWatermarkMs":0}')
    assert delta_source_position(native, "tid") == 2  # the lower of its two sources
    replaying = tmp_path / "r"  # started at version 0, not at a snapshot (decision 0069)
    replay_offset = native_offset[:-1] % 2 + ',"isStartingVersion":false}'
    _offsets(replaying, 0, replay_offset)
    assert delta_source_position(replaying, "tid") == 0
    (replaying / "commits").mkdir()
    (replaying / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}')
    assert delta_source_position(replaying, "tid") == 2
