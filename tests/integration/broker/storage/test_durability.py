"""Durability: a child process appends with per-append fsync (durability=sync, flushed
through LogManager.flush_dirty like the server does) and is SIGKILLed; the reopened
log holds every batch it acknowledged."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streams.broker.storage import LogManager, decode_records, validate_batches

REPO_ROOT = Path(__file__).resolve().parents[4]

CHILD = r"""
import sys
from streams.broker.storage import LogConfig, LogManager
from tests.unit.broker.storage.encoder import Rec, make_batch

logs = LogManager(sys.argv[1], default_config=LogConfig(segment_bytes=256 * 1024)).load()
logs.create_topic("t", 2, {"durability": "sync"})
i = 0
while True:
    p = i % 2
    batch = make_batch([Rec(b"%d" % i, (b"%d-%d;" % (i, j)) * 40) for j in range(8)])
    info = logs.get_log("t", p).append(batch)
    logs.flush_dirty()
    assert logs.get_log("t", p).high_watermark > info.last_offset
    print(f"ACK {i} {p} {info.base_offset}", flush=True)
    i += 1
"""


def expected_values(i: int) -> list[bytes]:
    return [(b"%d-%d;" % (i, j)) * 40 for j in range(8)]


@pytest.mark.slow
@pytest.mark.parametrize("acks_before_kill", [50, 400])
def test_acknowledged_batches_survive_sigkill(tmp_path: Path, acks_before_kill: int) -> None:
    data_dir = tmp_path / "data"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(data_dir)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    acked: list[tuple[int, int, int]] = []
    try:
        deadline = time.monotonic() + 120
        assert child.stdout is not None
        while len(acked) < acks_before_kill and time.monotonic() < deadline:
            line = child.stdout.readline()
            if not line:
                break
            _, i, p, base = line.split()
            acked.append((int(i), int(p), int(base)))
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        # Lines the child printed after we stopped reading were acknowledged too.
        assert child.stdout is not None
        for line in child.stdout.read().splitlines():
            if line.startswith("ACK "):
                _, i, p, base = line.split()
                acked.append((int(i), int(p), int(base)))
    assert child.returncode == -signal.SIGKILL
    assert len(acked) >= acks_before_kill, child.stderr.read() if child.stderr else ""

    with LogManager(data_dir) as logs:
        for i, p, base in acked:
            log = logs.get_log("t", p)
            assert log.log_end_offset >= base + 8
            (first, *_) = validate_batches(log.read(base, 1))
            assert first.base_offset == base
            records = decode_records(log.read(base, 1)[: first.size])
            assert [r.value for r in records] == expected_values(i)
            assert [r.offset for r in records] == list(range(base, base + 8))
        # Nothing but whole batches, and the partitions are writable again.
        for p in (0, 1):
            log = logs.get_log("t", p)
            offset = 0
            while offset < log.log_end_offset:
                data = log.read(offset, 1 << 20)
                offset = validate_batches(data)[-1].next_offset
            assert offset == log.log_end_offset
