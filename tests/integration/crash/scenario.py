"""The kill-and-restart scenario of the crash tests: Kafka -> Delta under SIGKILL, no
loss, no duplicate, by Kafka coordinates and by key (append, upsert and SCD2 tables fed by a
CDC stream with deletes and late changes, and an append through the Arrow path).

A child process (child.py) runs the real Kafka source into the real Delta sink on a
topic produced up front. It is killed at random points (armed crash points right before /
right after a Delta commit, and timer kills at random moments: starting, reading,
writing files) at least `min_kills` times, restarted on the same checkpoint until it
drains the topic. Then the checkpoint is deleted and a new query resumes from the offsets
recorded in the table. `sigkill_anywhere` runs it all; test_kill_restart.py runs it in a
local session, test_cluster_crash.py (tests/integration/cluster) with the child as the
driver of a standalone cluster.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest

import streams.storage as storage
from streams.delta import recorded_offsets, remove_orphans, tombstone_path
from streams.delta.arrow import read_table
from streams.kafka.admin import end_offsets, ensure_topic, produce
from tests.integration.crash.child import STARTED_MARKER

CHILD = Path(__file__).with_name("child.py")
REPO = Path(__file__).resolve().parents[3]
N_KEYS = 300
LIFE_TIMEOUT_S = 240
# A life that drains the topic (the last one, and the one after the checkpoint is lost)
# runs every batch left; on the native engine a batch of three tables takes 30-75 s on
# 2 cores under load, so draining is bounded apart from a life that is killed early.
DRAIN_TIMEOUT_S = 900
# Records per micro-batch: the native engine's cost per batch is mostly fixed (Delta's
# MERGE planning and commits), so it takes larger batches to drain in fewer of them.
BATCH_RECORDS = {"python": 200, "native": 600}
MAX_LIVES = 60


def _change(i: int) -> tuple[int, str, bool]:
    """Record `i` as a change of key `k{i % N_KEYS}`: its `seq`, its op, and whether it is
    late. Every 7th change deletes the key; every 11th from the third round of keys on
    is a late update or delete whose `seq` is older than its key's previous change, so
    only the tombstone of a delete keeps it from reviving a deleted key. A late `seq`
    is never one its key had."""
    if i > 2 * N_KEYS and i % 11 == 5:
        return i - 2 * N_KEYS - 1, "d" if i % 2 else "u", True
    return i, "d" if i % 7 == 3 else "u", False


def _value(i: int) -> str:
    # Every 50th has a number in its string field `s`: Spark types it ("<i>"), Arrow
    # refuses it, so the Arrow path's fallback runs in most batches.
    seq, op, late = _change(i)
    value = {"i": i, "seq": seq, "op": op, "late": late}
    return json.dumps({**value, "s": i} if i % 50 == 0 else value)


def _records(first: int, n: int) -> list[tuple[str, str]]:
    return [(f"k{i % N_KEYS}", _value(i)) for i in range(first, first + n)]


def _in_order(produced: int) -> dict[str, list[tuple[int, str]]]:
    """Each key's changes that are not late, in order: `(seq, op)`."""
    out: dict[str, list[tuple[int, str]]] = {}
    for i in range(produced):
        seq, op, late = _change(i)
        if not late:
            out.setdefault(f"k{i % N_KEYS}", []).append((seq, op))
    return out


class Child:
    """One life of the child process, in its own process group (the JVM and Python
    workers die with it when the group is killed)."""

    def __init__(
        self,
        params: dict,
        log: Path,
        crash_points: str | None,
        p: float,
        env: dict[str, str] | None = None,
    ) -> None:
        env = {
            **(os.environ if env is None else env),
            "PYSPARK_PYTHON": sys.executable,
            "PYTHONPATH": str(REPO),
        }
        env.pop("WAREHOUSE_CRASH_POINT", None)
        if crash_points:
            env["WAREHOUSE_CRASH_POINT"] = crash_points
            env["WAREHOUSE_CRASH_PROBABILITY"] = str(p)
        self.log = log
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, str(CHILD), json.dumps(params)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=REPO,
                start_new_session=True,
            )

    def kill_group(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            # Whatever the child did, nothing of its process group outlives it.
            self.kill_group()


def _started(log: Path, proc: subprocess.Popen, timeout: float) -> bool:
    """Wait until the child's query is running (its marker line is in the log)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if STARTED_MARKER in log.read_text(errors="replace"):
            return True
        time.sleep(0.2)
    return False


@dataclass
class Lives:
    """How the child lives: at least `min_kills` SIGKILLs of its process group, timer kills
    a random 0-`timer_s` s after its query started, in the environment `env` (None: this
    process's). `beside`, when given, runs in a thread beside each life armed with crash
    points (its log and process; it returns when the life ends), and `beside_done` says
    when it has done enough: lives go on until it has."""

    min_kills: int
    timer_s: float = 4.0
    env: dict[str, str] | None = None
    beside: Callable[[Path, subprocess.Popen], None] | None = None
    beside_done: Callable[[], bool] = lambda: True


def _run_with_kills(
    params: dict, logs: Path, rng: random.Random, more: Callable[[], None], lives_: Lives
) -> int:
    """Lives alternate between armed crash points (right before / after a Delta commit)
    and timer kills a random moment after the query started (reading Kafka, writing
    files, merging, committing: wherever it happens to be)."""
    kills = lives = 0
    while kills < lives_.min_kills or not lives_.beside_done():
        assert lives < MAX_LIVES, f"only {kills} kills in {lives} lives"
        lives += 1
        timer = rng.random() < 0.4
        log = logs / f"life-{lives:03d}.log"
        child = Child(params, log, None if timer else "before_commit,after_commit", 0.3, lives_.env)
        beside = None
        if lives_.beside is not None and not timer:
            beside = threading.Thread(target=lives_.beside, args=(log, child.proc), daemon=True)
            beside.start()
        if timer and _started(log, child.proc, LIFE_TIMEOUT_S):
            time.sleep(rng.uniform(0.0, lives_.timer_s))
            child.kill_group()
        rc = child.wait(LIFE_TIMEOUT_S)
        if beside is not None:
            beside.join()
        if rc == -signal.SIGKILL:
            kills += 1
        elif rc == 0:
            more()  # drained before enough kills: give the next lives work
        else:
            pytest.fail(f"child life {lives} exited {rc}:\n{log.read_text()[-4000:]}")
    return kills


def _finish(params: dict, log: Path, env: dict[str, str] | None) -> None:
    rc = Child(params, log, None, 0, env).wait(DRAIN_TIMEOUT_S)
    assert rc == 0, f"final child exited {rc}:\n{log.read_text()[-4000:]}"


def _coordinates(path: str) -> list[tuple[str, int, int]]:
    t = pa.table(read_table(path, columns=["_topic", "_partition", "_offset"]))
    return sorted(zip(*(t.column(c).to_pylist() for c in t.column_names), strict=True))


def _latest(path: str) -> dict[str, int]:
    t = pa.table(read_table(path, columns=["k", "seq"]))
    keys, seqs = t.column("k").to_pylist(), t.column("seq").to_pylist()
    assert len(keys) == len(set(keys)), "upsert table holds a key twice"
    return dict(zip(keys, seqs, strict=True))


def _history(path: str) -> dict[str, list[tuple[int, bool]]]:
    """The SCD2 table per key: its versions' `seq` in order, and which is current."""
    t = pa.table(read_table(path, columns=["k", "seq", "is_current"]))
    out: dict[str, list[tuple[int, bool]]] = {}
    for k, seq, current in zip(*(t.column(c).to_pylist() for c in t.column_names), strict=True):
        out.setdefault(k, []).append((seq, current))
    return {k: sorted(v) for k, v in out.items()}


def _expected_history(produced: int) -> dict[str, list[tuple[int, bool]]]:
    """Every change of a key is one version, each once, a delete a closed one (it keeps
    the delete's `seq`); the latest is the current one unless it is a delete."""
    return {
        k: [(seq, n == len(changes) - 1 and op != "d") for n, (seq, op) in enumerate(changes)]
        for k, changes in _in_order(produced).items()
    }


def _arrow_rows(path: str) -> list[tuple[str, int, int]]:
    """The Arrow path's table: coordinates, and each row's `s` as Spark types it."""
    t = pa.table(read_table(path, columns=["_topic", "_partition", "_offset", "i", "s"]))
    for i, s in zip(t.column("i").to_pylist(), t.column("s").to_pylist(), strict=True):
        assert s == (str(i) if i % 50 == 0 else None), (i, s)
    return _coordinates(path)


def _expected(produced: int) -> dict[str, int]:
    """The upsert table: each key at its last change, unless that deleted it."""
    return {k: c[-1][0] for k, c in _in_order(produced).items() if c[-1][1] != "d"}


def _deleted(produced: int) -> dict[str, int]:
    """The keys the feed left deleted, at their delete's `seq`."""
    return {k: c[-1][0] for k, c in _in_order(produced).items() if c[-1][1] == "d"}


def _tombstones(path: str) -> dict[str, int]:
    t = pa.table(read_table(tombstone_path(path), columns=["k", "seq"]))
    return dict(zip(t.column("k").to_pylist(), t.column("seq").to_pylist(), strict=True))


def crash_seed() -> str:
    """`CRASH_SEED` from the environment, else a new one."""
    return os.environ.get("CRASH_SEED") or str(time.time_ns())


def sigkill_anywhere(
    bootstrap: str,
    topic: str,
    where: str,
    engine: str,
    logs: Path,
    lives: Lives,
    *,
    child: dict | None = None,
    seed: str | None = None,
) -> int:
    """The scenario on a new `topic` of the Kafka at `bootstrap`, tables and checkpoint
    under `where`, on `engine`; `child`: more of the child's params (its session); `seed`:
    the kill choices' (default `crash_seed()`). Returns how many times the child was
    killed."""
    seed = seed or crash_seed()
    # Shown with a failure's captured output: the same seed replays the same choices of
    # kill points and timer delays (the machine's timing still moves where a timer hits).
    print(f"CRASH_SEED={seed}")
    rng = random.Random(seed)
    ensure_topic(bootstrap, topic, partitions=2)
    n = 2000
    assert produce(bootstrap, topic, _records(0, n)) == n
    params = {
        "bootstrap": bootstrap,
        "topic": topic,
        "checkpoint": f"{where}/ckpt",
        "append_path": f"{where}/events",
        "upsert_path": f"{where}/latest",
        "arrow_path": f"{where}/arrow",
        "scd2_path": f"{where}/history",
        "max_offsets_per_trigger": BATCH_RECORDS[engine],
        "engine": engine,
        **(child or {}),
    }
    tables = ["append_path", "upsert_path", "scd2_path", "arrow_path"]

    def check(n: int) -> None:
        assert _coordinates(params["append_path"]) == produced
        assert _latest(params["upsert_path"]) == _expected(n)
        tombstones = _tombstones(params["upsert_path"])
        assert {k: tombstones.get(k) for k in _deleted(n)} == _deleted(n)
        assert _history(params["scd2_path"]) == _expected_history(n)
        assert _arrow_rows(params["arrow_path"]) == produced

    def more() -> None:
        nonlocal n
        assert produce(bootstrap, topic, _records(n, 400)) == 400
        n += 400

    kills = _run_with_kills(params, logs, rng, more, lives)
    _finish(params, logs / "final.log", lives.env)
    assert kills >= lives.min_kills

    produced = sorted((topic, p, o) for p, o in _offsets_of(bootstrap, topic))
    assert len(produced) == n
    check(n)
    # Files of attempts killed before their commit are unreferenced; removing them
    # changes nothing in the tables.
    for key in tables:
        remove_orphans(params[key], older_than_hours=0)
        assert not storage.list_names(f"{params[key]}/_warehouse_staging")
    check(n)

    # Checkpoint lost: a new query starts from the offsets the table recorded.
    offsets = recorded_offsets(params["append_path"], table="events")
    assert offsets == recorded_offsets(params["upsert_path"], table="latest")
    assert offsets == recorded_offsets(params["scd2_path"], table="history")
    assert offsets == recorded_offsets(params["arrow_path"], table="arrow")
    assert sum(offsets[topic].values()) == n
    m = 500
    assert produce(bootstrap, topic, _records(n, m)) == m
    assert storage.remove(params["checkpoint"])
    _finish({**params, "starting_offsets": offsets}, logs / "recover.log", lives.env)
    produced = sorted((topic, p, o) for p, o in _offsets_of(bootstrap, topic))
    assert len(produced) == n + m
    check(n + m)
    return kills


def _offsets_of(bootstrap: str, topic: str) -> list[tuple[int, int]]:
    """Every (partition, offset) the topic holds, from the brokers' end offsets (the topic
    has no gaps: plain producer, no compaction, no transactions)."""
    ends = end_offsets(bootstrap, [topic])[topic]
    return [(int(p), o) for p, end in ends.items() for o in range(end)]
