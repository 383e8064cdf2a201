"""End-to-end latency of the example warehouse in continuous mode.

    .venv/bin/python benchmarks/latency_bench.py [--seconds 180] [--rate 10]
        [--probe-every 5] [--initial-events 300] [--bootstrap HOST:PORT]
        [--chain-only] [--trigger "5 seconds"] [--engines python,native]

Starts the bundled broker (unless `--bootstrap`), loads the repository's example
project into a temporary warehouse root, produces a first slice of the generator's
timeline and runs every table once so the tables exist, then runs all twelve queries
continuously (`--chain-only`: only the order path `ods_orders`, `dwd_orders`,
`dws_city_gmv_1m`, `ads_city_leaderboard`) while the generator produces `--rate` events
per second in the background. Probing starts once every query has started. Every `--probe-every` seconds it produces one probe order for a probe
user whose city exists only for probes; the probe's effect is the probe city's
`orders` count in `ads_city_leaderboard` reaching the probe's number. Latency =
the moment that count is seen minus the moment the probe order was produced, read
(a) from the ADS Delta table (polled every 0.2 s) and (b) from the published
compacted topic `mv.city_leaderboard` (a read_committed consumer). Prints p50/p99
of both. Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

REPO = Path(__file__).resolve().parents[1]
CHAIN = ["ods_orders", "dwd_orders", "dws_city_gmv_1m", "ads_city_leaderboard"]
"""The queries between an order and the leaderboard (`--chain-only`)."""
DIMENSIONS = ["dim_users", "dim_products"]
"""Run once first with `--chain-only`: `dwd_orders` joins their snapshots."""
PROBE_USER = "u-probe"
PROBE_CITY = "Probe City"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))
    return ordered[k]


def probe_user_record(now: dt.datetime) -> tuple[bytes, bytes]:
    ts = int(now.timestamp() * 1000)
    row = {
        "user_id": PROBE_USER,
        "name": "probe",
        "city": PROBE_CITY,
        "tier": "basic",
        "signup_date": now.date().isoformat(),
    }
    value = {
        "before": None,
        "after": row,
        "op": "c",
        "ts_ms": ts,
        "source": {"db": "shop", "table": "users", "ts_ms": ts},
    }
    return json.dumps({"user_id": PROBE_USER}).encode(), json.dumps(value).encode()


class TableWatcher(threading.Thread):
    """Polls the ADS table; records when the probe city's order count first reaches n."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.seen: dict[int, float] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        from deltalake import DeltaTable

        from streams.delta import read_table

        table = None
        while not self.stop.wait(0.2):
            try:
                if table is None:
                    table = DeltaTable(str(self.path))
                else:
                    table.update_incremental()
                rows = read_table(table, columns=["city", "orders"]).to_pylist()
            except Exception:  # noqa: BLE001 - not created yet, or a version being written
                continue
            now = time.time()
            for r in rows:
                if r["city"] == PROBE_CITY and r["orders"]:
                    for n in range(1, int(r["orders"]) + 1):
                        self.seen.setdefault(n, now)


class TopicWatcher(threading.Thread):
    """Consumes the published topic; records when the probe city's order count reaches n."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.topic = topic
        self.seen: dict[int, float] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        from confluent_kafka import Consumer

        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"latency-bench-{os.getpid()}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "topic.metadata.refresh.interval.ms": 1000,
                "fetch.wait.max.ms": 50,
            }
        )
        consumer.subscribe([self.topic])
        try:
            while not self.stop.is_set():
                msg = consumer.poll(0.2)
                if msg is None or msg.error() or msg.value() is None:
                    continue
                now = time.time()
                row = json.loads(msg.value())
                if row.get("city") == PROBE_CITY and row.get("orders"):
                    for n in range(1, int(row["orders"]) + 1):
                        self.seen.setdefault(n, now)
        finally:
            consumer.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=180)
    parser.add_argument("--rate", type=float, default=10.0, help="background events per second")
    parser.add_argument("--probe-every", type=float, default=5.0)
    parser.add_argument("--initial-events", type=int, default=300)
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--chain-only", action="store_true", help="run only the four order-path queries"
    )
    parser.add_argument(
        "--trigger",
        default=None,
        help="run every query on this processing-time interval (`5 seconds`) instead of "
        "what its spec says",
    )
    parser.add_argument(
        "--engines",
        default=None,
        help="comma-separated engines to run one after the other in this run, each with "
        "its own broker and warehouse root (`python,native`); default: what the "
        "project's conf says (`auto`)",
    )
    args = parser.parse_args()
    engines = args.engines.split(",") if args.engines else [None]
    results = [(engine, run_case(args, engine)) for engine in engines]
    if len(results) > 1:
        print("\n== by engine ==")
        for engine, (table, topic) in results:
            print(f"{engine}: table p50/p99 {table}, topic p50/p99 {topic}")
    return 0


def run_case(args: argparse.Namespace, engine: str | None) -> tuple[str, str]:
    """One measurement on `engine` (both Kafka and Delta), or on the conf's engines."""
    from confluent_kafka import Producer

    from streams.broker.launcher import BrokerProcess
    from warehouse import Project
    from warehouse.demo.continuous import Producer as Background
    from warehouse.demo.continuous import split_timeline
    from warehouse.demo.run import run_once
    from warehouse.generate import ShopGenerator, ensure_topics, iso, produce_records
    from warehouse.runtime.pipeline import Pipeline
    from warehouse.runtime.session import get_session

    work = Path(tempfile.mkdtemp(prefix="latency-bench-"))
    broker = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        broker = BrokerProcess(work / "broker").start()
        bootstrap = broker.bootstrap
    overrides = {} if engine is None else {"engines": {"kafka": engine, "delta": engine}}
    print(f"\n== engines: {engine or 'as the conf says'} ==", flush=True)
    try:
        project = Project.load(
            REPO, warehouse_root=str(work / "wh"), kafka={"bootstrap": bootstrap}, **overrides
        )
        if args.trigger:
            from warehouse.spec.table import Trigger

            for name, defn in project.tables.items():
                spec = defn.spec.model_copy(update={"trigger": Trigger(interval=args.trigger)})
                project.tables[name] = defn.model_copy(update={"spec": spec})
        spark = get_session(project.config.spark, app_name="latency-bench")
        spark.sparkContext.setLogLevel("ERROR")
        ensure_topics(bootstrap)
        gap = 1.0 / args.rate
        span = args.initial_events * gap
        gen = ShopGenerator(
            seed=args.seed,
            start=dt.datetime.now(dt.UTC) - dt.timedelta(seconds=span),
            seconds_per_event=gap,
        )
        head, rest = split_timeline(gen.records(), span)
        produce_records(bootstrap, head)
        probe = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        key, value = probe_user_record(dt.datetime.now(dt.UTC))
        probe.produce("shop.users", key=key, value=value)
        probe.flush(30)
        t0 = time.monotonic()
        run_once(
            project,
            spark,
            bootstrap=bootstrap,
            tables=[*DIMENSIONS, *CHAIN] if args.chain_only else None,
            progress=lambda line: print(f"  once: {line}", flush=True),
        )
        print(f"first run of every layer: {time.monotonic() - t0:.0f}s", flush=True)

        started: list[str] = []

        def progress(line: str) -> None:
            if ": started (" in line:
                started.append(line.split(" ", 1)[0])
            print(f"  continuous: {line}", flush=True)

        pipeline = Pipeline(
            project,
            spark,
            layer="all",
            tables=CHAIN if args.chain_only else None,
            bootstrap=bootstrap,
            progress=progress,
            batch_progress=lambda line: None,
        )
        runner = threading.Thread(target=pipeline.run, kwargs={"once": False}, daemon=True)
        background = Background(
            bootstrap, rest, pace_from=span + (time.monotonic() - t0), client_config={}
        )
        table_w = TableWatcher(project.table_path("ads_city_leaderboard"))
        topic_w = TopicWatcher(bootstrap, "mv.city_leaderboard")
        for t in (runner, background, table_w, topic_w):
            t.start()
        t1 = time.monotonic()
        while len(set(started)) < len(pipeline.names) and runner.is_alive():
            time.sleep(0.5)
        print(f"every query started: {time.monotonic() - t1:.0f}s", flush=True)
        sent: dict[int, float] = {}
        deadline = time.monotonic() + args.seconds
        n = 0
        while time.monotonic() < deadline:
            n += 1
            now = dt.datetime.now(dt.UTC)
            order = {
                "order_id": f"probe-{n:05d}",
                "user_id": PROBE_USER,
                "product_id": "p001",
                "quantity": 1,
                "amount": 1.0,
                "currency": "EUR",
                "event_time": iso(now),
            }
            sent[n] = time.time()
            probe.produce(
                "orders", key=order["order_id"].encode(), value=json.dumps(order).encode()
            )
            probe.flush(30)
            time.sleep(args.probe_every)
        # let the last probes through, then stop at a batch boundary
        settle = time.monotonic() + 120
        while time.monotonic() < settle and (len(table_w.seen) < n or len(topic_w.seen) < n):
            time.sleep(1)
        pipeline.request_stop()
        background.stop.set()
        runner.join(timeout=300)
        for w in (table_w, topic_w):
            w.stop.set()
            w.join(timeout=30)
        return report(sent, table_w.seen, topic_w.seen, args)
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(work, ignore_errors=True)


def report(
    sent: dict[int, float],
    table_seen: dict[int, float],
    topic_seen: dict[int, float],
    args: argparse.Namespace,
) -> tuple[str, str]:
    """Prints the figures; returns `p50 / p99` of the table and of the topic."""
    out = []
    print(
        f"\nprobes: {len(sent)} (one every {args.probe_every:g}s), background {args.rate:g} events/s, "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}"
    )
    for name, seen in (("ADS Delta table", table_seen), ("published topic", topic_seen)):
        lat = [seen[n] - sent[n] for n in sent if n in seen]
        missing = len(sent) - len(lat)
        if not lat:
            print(f"{name}: no probe seen")
            out.append("-")
            continue
        out.append(f"{percentile(lat, 0.5):.1f}s / {percentile(lat, 0.99):.1f}s")
        print(
            f"{name}: p50 {percentile(lat, 0.5):.1f}s  p99 {percentile(lat, 0.99):.1f}s  "
            f"min {min(lat):.1f}s  max {max(lat):.1f}s  mean {statistics.mean(lat):.1f}s"
            + (f"  ({missing} probe(s) never seen)" if missing else "")
        )
    return out[0], out[1]


if __name__ == "__main__":
    sys.exit(main())
