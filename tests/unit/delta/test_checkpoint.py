"""Parsing Spark's checkpoint files (written here in Spark's exact layout)."""

from __future__ import annotations

import json
from pathlib import Path

from streams.delta import batch_end_offsets, checkpoint_query_id

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
