"""Micro benchmark of the broker's storage layer: append and read MB/s.

Batches of 1 KB records (16 KB to 1 MB per batch) are appended to a
`PartitionLog` and read back sequentially with `read()`, and compared with a
plain `f.write` / `f.read` of the same bytes measured in the same run (the
ratio is what matters; absolute figures depend on the machine).

    .venv/bin/python benchmarks/broker_storage_bench.py [--total-mb 512] [--dir /tmp]

Append includes CRC validation of every batch and the base offset patch; no
fsync (interval policy), like the baseline. Runs alternate baseline and storage
and the best of `--repeats` is kept, so page-cache warm-up hits both alike.
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import tempfile
import time
from pathlib import Path

from crc32c import crc32c

from streams.broker.storage import LogConfig, PartitionLog

RECORD = 1024


def _varint(v: int) -> bytes:
    v = (v << 1) ^ (v >> 63)
    out = bytearray()
    while v & ~0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def make_batch(batch_bytes: int) -> bytes:
    """An uncompressed RecordBatch v2 of ~batch_bytes with 1 KB values."""
    n = max(1, batch_bytes // (RECORD + 16))
    records = []
    for i in range(n):
        key = b"key-%08d" % i
        body = (
            b"\x00"
            + _varint(i)
            + _varint(i)
            + _varint(len(key))
            + key
            + _varint(RECORD)
            + os.urandom(RECORD)
            + _varint(0)
        )
        records.append(_varint(len(body)) + body)
    now = int(time.time() * 1000)
    body = struct.pack(">hiqqqhii", 0, n - 1, now, now + n - 1, -1, -1, -1, n) + b"".join(records)
    return struct.pack(">qiib", 0, len(body) + 9, -1, 2) + struct.pack(">I", crc32c(body)) + body


def _baseline(batch: bytes, count: int, root: Path) -> tuple[float, float]:
    path = root / "baseline.bin"
    t = time.perf_counter()
    with open(path, "wb") as f:
        for _ in range(count):
            f.write(batch)
    write_s = time.perf_counter() - t
    t = time.perf_counter()
    with open(path, "rb") as f:
        while f.read(1 << 20):
            pass
    read_s = time.perf_counter() - t
    path.unlink()
    return write_s, read_s


def _storage(batch: bytes, count: int, root: Path) -> tuple[float, float]:
    d = root / "log"
    config = LogConfig(segment_bytes=256 * 1024 * 1024, max_message_bytes=8 * 1024 * 1024)
    log = PartitionLog(d, config=config)
    t = time.perf_counter()
    for _ in range(count):
        log.append(batch)
    append_s = time.perf_counter() - t
    t = time.perf_counter()
    offset, got, end = 0, 0, log.log_end_offset
    while offset < end:
        data = log.read(offset, 1 << 20)
        got += len(data)
        offset = _next_offset(data)
    read_s = time.perf_counter() - t
    assert got == count * len(batch), (got, count * len(batch))
    log.close()
    shutil.rmtree(d)
    return append_s, read_s


def bench(batch_bytes: int, total: int, root: Path, repeats: int) -> dict[str, float]:
    """Best of `repeats` interleaved runs of the baseline and the storage."""
    batch = make_batch(batch_bytes)
    count = max(1, total // len(batch))
    volume = count * len(batch) / 1e6
    base_w = base_r = log_w = log_r = float("inf")
    for _ in range(repeats):
        w, r = _baseline(batch, count, root)
        base_w, base_r = min(base_w, w), min(base_r, r)
        w, r = _storage(batch, count, root)
        log_w, log_r = min(log_w, w), min(log_r, r)
    return {
        "batch_kb": len(batch) / 1024,
        "append": volume / log_w,
        "write": volume / base_w,
        "read": volume / log_r,
        "fread": volume / base_r,
    }


def _next_offset(data: bytes) -> int:
    pos = 0
    nxt = 0
    while pos < len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        (delta,) = struct.unpack_from(">i", data, pos + 23)
        nxt = base + delta + 1
        pos += length + 12
    return nxt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--total-mb", type=int, default=128, help="MB appended per run")
    parser.add_argument("--repeats", type=int, default=3, help="runs per batch size (best kept)")
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="storage-bench-", dir=args.dir))
    try:
        print(
            f"{'batch':>8} {'append MB/s':>12} {'f.write MB/s':>13} {'ratio':>6} "
            f"{'read MB/s':>10} {'f.read MB/s':>12} {'ratio':>6}"
        )
        for size in (16 * 1024, 64 * 1024, 256 * 1024, 1024 * 1024):
            r = bench(size, args.total_mb * 1024 * 1024, root, args.repeats)
            print(
                f"{r['batch_kb']:>6.0f}KB {r['append']:>12.0f} {r['write']:>13.0f} "
                f"{r['append'] / r['write']:>6.2f} {r['read']:>10.0f} {r['fread']:>12.0f} "
                f"{r['read'] / r['fread']:>6.2f}"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
