"""A killed query's half-written log entries are removed before the next start."""

from __future__ import annotations

from pathlib import Path

from streams.delta import remove_interrupted_writes


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
    assert sorted(remove_interrupted_writes(ckpt)) == sorted(partial)
    assert all(f.exists() for f in kept)
    assert not any(f.exists() for f in partial)
    assert remove_interrupted_writes(ckpt) == []
    assert remove_interrupted_writes(tmp_path / "never-started") == []
