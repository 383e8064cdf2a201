"""`streams.storage` against a real S3-API server (S3Proxy, tests/support/s3.py): files,
the lease that keeps one process per table, and the conditional put under delta-rs's
commits."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pyarrow as pa
import pytest
from deltalake import CommitProperties, write_deltalake
from pyarrow.fs import FileSelector

import streams.storage as storage
from streams.delta import read_table
from streams.delta.tables import open_table, storage_options
from tests.conftest import REPO_ROOT

pytestmark = [pytest.mark.s3]


def test_small_files_and_folders_round_trip(s3_root: str) -> None:
    base = storage.join(s3_root, "checkpoints", "t")
    assert storage.read_text(storage.join(base, "metadata")) is None
    assert storage.list_names(base) == [] and not storage.exists(base)
    storage.write_text(storage.join(base, "metadata"), '{"id": "q"}')
    storage.write_text(storage.join(base, "offsets", "0"), "v1\n{}\n")
    assert storage.read_text(storage.join(base, "metadata")) == '{"id": "q"}'
    assert storage.list_names(base) == ["metadata", "offsets"]
    assert storage.is_dir(base) and storage.is_file(storage.join(base, "metadata"))
    assert sorted(storage.walk_files(base)) == ["metadata", "offsets/0"]
    # s3:// and s3a:// name the same objects
    assert storage.read_text(storage.join(base.replace("s3a://", "s3://"), "metadata"))
    assert storage.remove(base) and not storage.exists(base) and not storage.remove(base)


def _settings(seconds: float) -> storage.StorageSettings:
    return storage.StorageSettings.from_environ(os.environ, lease_seconds=seconds)


HOLDER = """
import os, sys, time
import streams.storage as storage
lease = storage.Lease(sys.argv[1], {"pid": os.getpid(), "host": "h", "command": "holder",
                      "doing": "run", "since": "now"},
                      settings=storage.StorageSettings.from_environ(os.environ, lease_seconds=4))
assert lease.acquire() is None
print("held", flush=True)
time.sleep(600)
"""


def test_a_lease_holds_while_renewed_and_expires_when_its_holder_dies(s3_root: str) -> None:
    where = storage.join(s3_root, "checkpoints", "t.lock")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, where],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        mine = storage.Lease(where, {"pid": os.getpid()}, settings=_settings(4))
        time.sleep(5)  # longer than the lease: the holder renews it
        busy = mine.acquire()
        assert busy is not None and busy["pid"] == holder.pid and busy["command"] == "holder"
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(30)
        # The lease runs from the holder's last renewal (its generation's time in the
        # store), which load can put well before the kill: measure from there.
        renewed = time.time() - busy["renewed_seconds_ago"]
        killed = time.monotonic()
        while (busy := mine.acquire()) is not None:
            assert busy["pid"] == holder.pid
            renewed = max(renewed, time.time() - busy["renewed_seconds_ago"])
            # a hang guard, not a timing: the lease is 4 s
            assert time.monotonic() - killed < 30, "the dead holder's lease did not expire"
            time.sleep(0.5)
        # not before its lease time (`renewed_seconds_ago` is rounded to 0.1 s)
        assert time.time() - renewed >= 4 - 0.1
        other = storage.Lease(where, {"pid": 1}, settings=_settings(4))
        assert other.acquire()["pid"] == os.getpid()
        mine.release()
        assert other.acquire() is None  # released: taken at once
        other.release()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(30)


def test_a_holder_learns_when_its_lease_was_taken_over(s3_root: str) -> None:
    where = storage.join(s3_root, "checkpoints", "u.lock")
    lost: list[Exception] = []
    held = storage.Lease(where, {"pid": 1}, settings=_settings(4), on_lost=lost.append)
    assert held.acquire() is None
    # What a process that found the lease expired does: create the next generation.
    newest = held.generations()[-1]
    storage.write_text(
        storage.join(where, f"{newest.number + 1:012d}.json"), json.dumps({"pid": 2})
    )
    deadline = time.monotonic() + 5
    while not lost and time.monotonic() < deadline:
        time.sleep(0.2)
    assert held.lost and isinstance(lost[0], storage.LeaseLostError)
    assert "another process took it" in str(lost[0])
    held.release()


def test_two_processes_racing_for_a_lease_get_it_once(s3_root: str) -> None:
    where = storage.join(s3_root, "checkpoints", "v.lock")
    leases = [storage.Lease(where, {"pid": i}, settings=_settings(30)) for i in range(6)]
    barrier = threading.Barrier(len(leases))
    got: list[object] = [None] * len(leases)

    def take(i: int) -> None:
        barrier.wait()
        got[i] = leases[i].acquire()

    threads = [threading.Thread(target=take, args=(i,)) for i in range(len(leases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(g is None for g in got) == 1
    for lease, g in zip(leases, got, strict=True):
        if g is None:
            lease.release()


def test_two_commits_of_one_version_on_s3_cannot_both_succeed(s3_root: str) -> None:
    """delta-rs commits on S3 with a conditional put of the next log entry: of writers
    racing for one version, exactly one commits (docs/decisions/0031)."""
    path = storage.join(s3_root, "tables", "race")
    write_deltalake(path, pa.table({"a": [0]}), storage_options=storage_options(path))
    barrier = threading.Barrier(6)
    outcomes: list[str] = []

    def append(i: int) -> None:
        table = open_table(path)
        barrier.wait()
        try:
            write_deltalake(
                table,
                pa.table({"a": [i + 1]}),
                mode="append",
                commit_properties=CommitProperties(max_commit_retries=0),
            )
            outcomes.append("committed")
        except Exception as e:  # noqa: BLE001  # delta-rs's CommitFailedError, counted
            outcomes.append(type(e).__name__)

    threads = [threading.Thread(target=append, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("committed") == 1, outcomes
    assert open_table(path).version() == 1
    assert read_table(path).num_rows == 2


def test_orphan_cleanup_removes_staging_folders_left_as_directory_markers(s3_root: str) -> None:
    """A write attempt killed on S3 can leave a staging folder with no file in it, only
    the directory markers Hadoop's s3a keeps (`_temporary/0/`); `remove_orphans` removes
    it with the orphan files, and leaves the committed files."""
    from streams.delta import remove_orphans

    path = f"{s3_root}/events"
    write_deltalake(path, pa.table({"i": [1, 2]}), storage_options=storage_options(path))
    fs, key = storage.current().filesystem(path)
    fs.create_dir(f"{key}/_warehouse_staging/attempt-1/_temporary/0")  # markers only
    storage.write_text(f"{path}/_warehouse_staging/attempt-2/part-0.parquet", "staged")
    assert storage.list_names(f"{path}/_warehouse_staging") == ["attempt-1", "attempt-2"]

    removed = remove_orphans(path, older_than_hours=0)
    assert sorted(removed) == ["_warehouse_staging/attempt-1/", "_warehouse_staging/attempt-2/"]
    assert storage.list_names(f"{path}/_warehouse_staging") == []
    assert read_table(path).column("i").to_pylist() == [1, 2]


def test_a_folder_removed_by_two_cleanups_at_once_is_removed_without_error(s3_root: str) -> None:
    """A folder can be gone by the time its delete arrives (another cleanup removed it,
    or the store listed it a moment longer than it kept it): `remove` counts it removed
    and raises nothing, and nothing is listed there afterwards."""

    def remove(folder: str, barrier: threading.Barrier, errors: list[str]) -> None:
        barrier.wait()
        try:
            storage.remove(folder)
        except Exception as e:  # noqa: BLE001  # collected and asserted below
            errors.append(repr(e))

    for attempt in range(5):
        folder = f"{s3_root}/stage-{attempt}"
        for part in range(3):
            for n in range(4):
                storage.write_text(f"{folder}/part={part}/{n}.parquet", "staged")
        barrier = threading.Barrier(4)
        errors: list[str] = []
        threads = [
            threading.Thread(target=remove, args=(folder, barrier, errors)) for _ in range(4)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert f"stage-{attempt}" not in storage.list_names(s3_root)


def test_a_checkpoint_with_folder_markers_is_removed_with_nothing_left(s3, s3_root: str) -> None:
    """A checkpoint as Spark's S3A writes it, a marker object for every folder (`state/0/0/`)
    beside the files: `remove` leaves nothing the store lists, and no directory behind in
    S3Proxy's folder either, where a marker deleted before the last file under it leaves
    one that Spark's S3A lists ("state store location not empty" on a new checkpoint)."""
    bucket, key = s3_root.removeprefix("s3a://").split("/", 1)
    fs, root = storage.current().filesystem(s3_root)
    for attempt in range(5):
        checkpoint = f"{s3_root}/checkpoints/t{attempt}"
        for folder in ["offsets", "commits", "sources/0", "state/0/0", "state/0/1", "state/1/0"]:
            fs.create_dir(f"{root}/checkpoints/t{attempt}/{folder}")  # markers, as S3A's mkdirs
        for name in ["offsets/0", "commits/0", "metadata", "sources/0/0", "state/0/_metadata/m"]:
            storage.write_text(f"{checkpoint}/{name}", "x")
        for part in ["0/0", "0/1", "1/0"]:
            for version in range(1, 4):
                storage.write_text(f"{checkpoint}/state/{part}/{version}.delta", "x")
        storage.write_text(f"{s3_root}/checkpoints/kept/commits/0", "x")

        assert storage.remove(checkpoint)

        left = fs.get_file_info(FileSelector(f"{root}/checkpoints", recursive=True))
        assert sorted(i.path.removeprefix(f"{root}/") for i in left) == [
            "checkpoints/kept",
            "checkpoints/kept/commits",
            "checkpoints/kept/commits/0",
        ]
        assert not (s3.folder / "data" / bucket / key / "checkpoints" / f"t{attempt}").exists()


def test_a_prefix_left_without_objects_is_no_folder(s3, s3_root: str) -> None:
    """S3Proxy's filesystem backend keeps a directory whose objects were deleted and lists
    it as a prefix, which no S3 request deletes (a race of parallel deletes leaves one).
    On object storage a folder is there while an object is under it: such a prefix does
    not exist, and a removal of it is done."""
    bucket, key = s3_root.removeprefix("s3a://").split("/", 1)
    storage.write_text(f"{s3_root}/kept/part-0.parquet", "data")
    (s3.folder / "data" / bucket / key / "gone" / "_temporary" / "0").mkdir(parents=True)

    fs, path = storage.current().filesystem(s3_root)
    assert "gone" in [i.base_name for i in fs.get_file_info(FileSelector(path))]  # listed
    assert storage.list_names(s3_root) == ["kept"]
    assert not storage.exists(f"{s3_root}/gone") and not storage.is_dir(f"{s3_root}/gone")
    assert storage.exists(f"{s3_root}/kept") and storage.is_dir(f"{s3_root}/kept")
    storage.remove(f"{s3_root}/gone")
    assert not storage.exists(f"{s3_root}/gone")
