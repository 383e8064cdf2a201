"""Produce and consume throughput of the bundled broker with confluent-kafka.

Cases: 1 and 4 partitions, 100 B and 1 KB records, acks=1 and acks=all. Each
case produces `--mb` megabytes to a fresh topic (timed until the last delivery
report), then reads them back from offset 0 with assign() (timed until the last
record). With `--peer host:port` every case also runs against that broker
(any Kafka-compatible one) and the ratio ours/peer is printed: the baseline is
measured in the same run, on the same machine, with the same client.

    .venv/bin/python benchmarks/broker_bench.py [--mb 200] [--peer 127.0.0.1:9093]
        [--durability interval|sync] [--cases 1kb-p1-acks1,...] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from streams.broker.launcher import BrokerProcess


@dataclass
class Result:
    case: str
    target: str
    records: int
    produce_mb_s: float
    produce_msgs_s: float
    consume_mb_s: float
    consume_msgs_s: float
    # broker process CPU (user+sys) per MB moved: a load-independent cost figure;
    # 1000 / ms_per_mb is the MB/s one core of the broker could sustain
    produce_cpu_ms_per_mb: float | None = None
    consume_cpu_ms_per_mb: float | None = None
    # this (client) process's CPU per MB, librdkafka threads included: when
    # 1000 / client ms/MB is near the MB/s reached, the client is what caps
    client_produce_cpu_ms_per_mb: float = 0.0
    client_consume_cpu_ms_per_mb: float = 0.0
    # what the consumer saw (librdkafka statistics): Fetch requests sent, and the mean
    # round trip of its requests to the partitions' broker (send to last byte received)
    consume_fetches: int | None = None
    consume_rtt_ms: float | None = None


def cpu_seconds(pid: int | None) -> float | None:
    """User+system CPU of a process from /proc (None when unknown)."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(60)


def _produce(bootstrap: str, topic: str, n: int, size: int, acks: str) -> float:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.kbytes": 512 * 1024,
            "queue.buffering.max.messages": 1_000_000,
            "enable.idempotence": False,
            "compression.type": "none",
        }
    )
    value = os.urandom(size)
    failures = []

    def on_delivery(err, _msg) -> None:
        if err is not None:
            failures.append(err)

    start = time.perf_counter()
    for i in range(n):
        while True:
            try:
                producer.produce(topic, value=value, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.005)
        if i % 1000 == 0:
            producer.poll(0)
    left = producer.flush(300)
    elapsed = time.perf_counter() - start
    if left or failures:
        raise RuntimeError(f"{left} undelivered, {len(failures)} failed: {failures[:3]}")
    return elapsed


class _FetchStats:
    """Fetch count and mean request round trip from librdkafka's statistics callbacks."""

    def __init__(self) -> None:
        self.fetches = 0
        self.rtt_us = 0.0
        self.rtt_count = 0

    def on_stats(self, text: str) -> None:
        for broker in json.loads(text)["brokers"].values():
            if broker["nodeid"] < 0:  # the bootstrap connection
                continue
            self.fetches = max(self.fetches, broker["req"].get("Fetch", 0))
            rtt = broker["rtt"]  # a window since the previous callback, in microseconds
            self.rtt_us += rtt["avg"] * rtt["cnt"]
            self.rtt_count += rtt["cnt"]

    def rtt_ms(self) -> float | None:
        return round(self.rtt_us / self.rtt_count / 1000, 2) if self.rtt_count else None


def _consume(bootstrap: str, topic: str, partitions: int, n: int) -> tuple[float, _FetchStats]:
    stats = _FetchStats()
    consumer = Consumer(
        {
            "statistics.interval.ms": 100,
            "stats_cb": stats.on_stats,
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 0,
            "fetch.max.bytes": 64 * 1024 * 1024,
            "max.partition.fetch.bytes": 16 * 1024 * 1024,
            "queued.max.messages.kbytes": 512 * 1024,
            "isolation.level": "read_uncommitted",
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    start = time.perf_counter()
    deadline = time.monotonic() + 300
    while got < n and time.monotonic() < deadline:
        # never ask for more than is left: consume() waits out its timeout when it
        # cannot fill the batch, which would add a second to every run
        for msg in consumer.consume(min(10_000, n - got), 1.0):
            if msg.error() is None:
                got += 1
    elapsed = time.perf_counter() - start
    consumer.poll(0.2)  # one more statistics callback: the last fetches' round trips
    consumer.close()
    if got < n:
        raise RuntimeError(f"consumed {got} of {n} records")
    return elapsed, stats


CASES = {
    f"{label}-p{p}-acks{acks}": (size, p, acks)
    for label, size in (("100b", 100), ("1kb", 1024))
    for p in (1, 4)
    for acks in ("1", "all")
}


def run_case(bootstrap: str, target: str, name: str, mb: float, pid: int | None = None) -> Result:
    size, partitions, acks = CASES[name]
    n = int(mb * 1024 * 1024 / size)
    topic = f"bench-{name}-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, partitions)
    c0, k0 = cpu_seconds(pid), time.process_time()
    t_produce = _produce(bootstrap, topic, n, size, acks)
    c1, k1 = cpu_seconds(pid), time.process_time()
    t_consume, stats = _consume(bootstrap, topic, partitions, n)
    c2, k2 = cpu_seconds(pid), time.process_time()
    volume = n * size / 1e6

    def per_mb(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else round((b - a) * 1000 / volume, 2)

    return Result(
        case=name,
        target=target,
        records=n,
        produce_mb_s=round(volume / t_produce, 1),
        produce_msgs_s=round(n / t_produce),
        consume_mb_s=round(volume / t_consume, 1),
        consume_msgs_s=round(n / t_consume),
        produce_cpu_ms_per_mb=per_mb(c0, c1),
        consume_cpu_ms_per_mb=per_mb(c1, c2),
        client_produce_cpu_ms_per_mb=round((k1 - k0) * 1000 / volume, 2),
        client_consume_cpu_ms_per_mb=round((k2 - k1) * 1000 / volume, 2),
        consume_fetches=stats.fetches,
        consume_rtt_ms=stats.rtt_ms(),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=200, help="megabytes per case (default 200)")
    parser.add_argument("--peer", help="host:port of another Kafka-compatible broker to compare")
    parser.add_argument("--peer-pid", type=int, help="pid of the peer, to report its CPU per MB")
    parser.add_argument("--bootstrap", help="use this running broker instead of starting one")
    parser.add_argument("--durability", default="interval", choices=["interval", "sync"])
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated case names")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    names = [c for c in args.cases.split(",") if c]
    unknown = [c for c in names if c not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {unknown}; choose from {sorted(CASES)}")

    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="broker-bench-") as tmp:
        proc = None
        bootstrap = args.bootstrap
        if bootstrap is None:
            proc = BrokerProcess(Path(tmp) / "data", config={"durability": args.durability})
            bootstrap = proc.start().bootstrap
        pid = proc.pid if proc is not None else None
        try:
            for name in names:
                results.append(run_case(bootstrap, "streams.broker", name, args.mb, pid))
                print(_row(results[-1]), flush=True)
                if args.peer:
                    results.append(run_case(args.peer, "peer", name, args.mb, args.peer_pid))
                    print(_row(results[-1]), flush=True)
        finally:
            if proc is not None:
                proc.stop()
    if args.peer:
        print("\nratio ours/peer (produce MB/s, consume MB/s):")
        ours = {r.case: r for r in results if r.target != "peer"}
        for r in results:
            if r.target == "peer":
                o = ours[r.case]
                print(
                    f"  {r.case:18s} {o.produce_mb_s / r.produce_mb_s:5.2f} "
                    f"{o.consume_mb_s / r.consume_mb_s:5.2f}"
                )
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2))
    return 0


def _row(r: Result) -> str:
    cpu = ""
    if r.produce_cpu_ms_per_mb is not None and r.consume_cpu_ms_per_mb is not None:
        cpu = f" | broker cpu ms/MB {r.produce_cpu_ms_per_mb:5.2f} {r.consume_cpu_ms_per_mb:5.2f}"
    client = f" | client cpu ms/MB {r.client_produce_cpu_ms_per_mb:5.2f} {r.client_consume_cpu_ms_per_mb:5.2f}"
    return (
        f"{r.case:18s} {r.target:15s} produce {r.produce_mb_s:7.1f} MB/s {r.produce_msgs_s:9d} msg/s"
        f" | consume {r.consume_mb_s:7.1f} MB/s {r.consume_msgs_s:9d} msg/s{cpu}{client}"
    )


if __name__ == "__main__":
    sys.exit(main())
