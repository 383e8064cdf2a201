"""The log's concurrency contract with real threads: flushes (and compaction) in workers
while one thread appends and another reads, as the server runs them."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from streams.broker.storage import LogConfig, PartitionLog, decode_records, validate_batches
from streams.broker.storage.cleaner import compact_log
from tests.unit.broker.storage.encoder import Rec, make_batch, value_batch


def run_in_thread(
    fn: Callable[[threading.Event], None],
) -> tuple[threading.Thread, threading.Event, list]:
    stop = threading.Event()
    errors: list[BaseException] = []

    def body() -> None:
        try:
            fn(stop)
        except BaseException as e:  # noqa: BLE001 -- a thread's failure, reported by the test
            errors.append(e)

    t = threading.Thread(target=body, daemon=True)
    t.start()
    return t, stop, errors


def test_flush_in_a_worker_while_appending_and_reading(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, config=LogConfig(durability="sync", segment_bytes=20_000))
    seen_hw: list[int] = []

    def flusher(stop: threading.Event) -> None:
        while not stop.is_set():
            log.flush()

    def reader(stop: threading.Event) -> None:
        offset = 0
        while not stop.is_set() or offset < log.high_watermark:
            hw = log.high_watermark
            seen_hw.append(hw)
            if offset < hw:
                data = log.read(offset, 5000, max_offset=hw)
                headers = validate_batches(data)
                assert headers[0].base_offset == offset and headers[-1].last_offset < hw
                offset = headers[-1].next_offset

    threads = [run_in_thread(flusher), run_in_thread(reader)]
    for _ in range(300):
        log.append(value_batch(3, size=150))
    for _, stop, _ in threads:
        stop.set()
    for t, _, _ in threads:
        t.join(timeout=60)
    for _, _, errors in threads:
        assert errors == []
    log.flush()
    assert log.high_watermark == log.log_end_offset == 900
    assert seen_hw == sorted(seen_hw)  # the high watermark never goes back
    assert len(log.segments) > 5
    log.close()


def test_compaction_in_a_worker_while_appending(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, config=LogConfig(cleanup_policy="compact", segment_bytes=3_000))
    runs = [0]

    def cleaner(stop: threading.Event) -> None:
        while not stop.is_set():
            runs[0] += 1
            compact_log(log, 2**62)

    thread, stop, errors = run_in_thread(cleaner)
    latest: dict[bytes, bytes] = {}
    for i in range(400):
        key, value = b"k%d" % (i % 7), b"v%d" % i
        latest[key] = value
        log.append(make_batch([Rec(key, value * 10)], base_timestamp=1))
    stop.set()
    thread.join(timeout=60)
    assert errors == [] and runs[0] > 0
    log.roll()
    compact_log(log, 2**62)
    got: dict[bytes, bytes] = {}
    offsets: list[int] = []
    offset = 0
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        headers = validate_batches(data)
        for h in headers:
            for r in decode_records(data[h.position : h.position + h.size]):
                got[r.key] = r.value
                offsets.append(r.offset)
        offset = headers[-1].next_offset
    assert got == {k: v * 10 for k, v in latest.items()}
    assert len(offsets) == 7 and offsets == sorted(offsets)
    log.close()
