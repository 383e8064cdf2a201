"""The latency benchmark's watchers, in a process of their own so that their CPU (delta-rs
reading the ADS table five times a second, a consumer of the published topic) is not
counted as the queries' (`proc_cpu` names this process's kind `watchers`).

Run as `python latency_watchers.py TABLE_PATH BOOTSTRAP TOPIC CITY`: prints
`table <n> <epoch seconds>` when the city's order count in the table first reaches n, and
`topic <n> <epoch seconds>` when a published record first says so, one line each, until
stdin closes.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

_print_lock = threading.Lock()


def _seen(kind: str, orders: object, seen: dict[int, float]) -> None:
    now = time.time()
    for n in range(1, int(orders) + 1):  # type: ignore[call-overload]
        if n not in seen:
            seen[n] = now
            with _print_lock:
                print(f"{kind} {n} {now:.6f}", flush=True)


def watch_table(path: str, city: str, stop: threading.Event) -> None:
    from deltalake import DeltaTable

    from streams.delta import read_table

    seen: dict[int, float] = {}
    table = None
    while not stop.wait(0.2):
        try:
            if table is None:
                table = DeltaTable(path)
            else:
                table.update_incremental()
            rows = read_table(table, columns=["city", "orders"]).to_pylist()
        except Exception:  # noqa: BLE001 - not created yet, or a version being written
            continue
        for r in rows:
            if r["city"] == city and r["orders"]:
                _seen("table", r["orders"], seen)


def watch_topic(bootstrap: str, topic: str, city: str, stop: threading.Event) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"latency-bench-{os.getpid()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "topic.metadata.refresh.interval.ms": 1000,
            # The broker answers a fetch as soon as a record (or a transaction's marker)
            # is appended, so a longer wait costs no latency, only fewer empty fetches.
            "fetch.wait.max.ms": 500,
        }
    )
    consumer.subscribe([topic])
    seen: dict[int, float] = {}
    try:
        while not stop.is_set():
            msg = consumer.poll(0.2)
            if msg is None or msg.error() or msg.value() is None:
                continue
            row = json.loads(msg.value())
            if row.get("city") == city and row.get("orders"):
                _seen("topic", row["orders"], seen)
    finally:
        consumer.close()


def main(argv: list[str]) -> int:
    path, bootstrap, topic, city = argv
    stop = threading.Event()
    threads = [
        threading.Thread(target=watch_table, args=(path, city, stop), daemon=True),
        threading.Thread(target=watch_topic, args=(bootstrap, topic, city, stop), daemon=True),
    ]
    for t in threads:
        t.start()
    sys.stdin.read()  # until the benchmark closes it
    stop.set()
    for t in threads:
        t.join(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
