"""Which local tables a new native row stream replays from version 0: those only ever
appended to, within one checkpoint interval (docs/decisions/0069)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

import streams.delta.tables as tables
from streams.delta.tables import appended_from_the_start


def _appended(path: Path, batches: int = 3) -> str:
    for b in range(batches):
        write_deltalake(str(path), pa.table({"id": [2 * b, 2 * b + 1]}), mode="append")
    return str(path)


def test_a_table_only_appended_to_is_replayed(tmp_path: Path) -> None:
    assert appended_from_the_start(_appended(tmp_path / "t"))


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda p: DeltaTable(p).optimize.compact(), id="compacted"),
        pytest.param(
            lambda p: write_deltalake(p, pa.table({"id": [9]}), mode="overwrite"), id="overwritten"
        ),
        pytest.param(
            lambda p: write_deltalake(
                p, pa.table({"id": [9], "city": ["rome"]}), mode="append", schema_mode="merge"
            ),
            id="schema-merged",
        ),
        pytest.param(lambda p: DeltaTable(p).delete("id = 1"), id="deleted"),
    ],
)
def test_a_table_changed_otherwise_keeps_the_snapshot_start(tmp_path: Path, change) -> None:
    path = _appended(tmp_path / "t")
    change(path)
    assert not appended_from_the_start(path)


def test_a_log_without_its_first_commit_keeps_the_snapshot_start(tmp_path: Path) -> None:
    path = _appended(tmp_path / "t")
    (tmp_path / "t" / "_delta_log" / f"{0:020d}.json").unlink()
    assert not appended_from_the_start(path)
    assert not appended_from_the_start(str(tmp_path / "none"))


def test_more_versions_than_one_checkpoint_interval_keep_the_snapshot_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _appended(tmp_path / "t", batches=2)
    monkeypatch.setattr(tables, "REPLAY_MAX_VERSIONS", 1)
    assert not appended_from_the_start(path)
    monkeypatch.setattr(tables, "REPLAY_MAX_VERSIONS", 2)
    assert appended_from_the_start(path)
