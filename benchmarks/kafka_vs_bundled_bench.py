"""The bundled broker against Apache Kafka: same machine, same run, same clients.

One command starts both brokers itself, on 127.0.0.1, with data under one temporary
directory on the same file system:

- `interval` mode: ours with `durability=interval`; Kafka with its default flush (none:
  the page cache and replication, `log.flush.interval.messages` unset).
- `sync` mode: ours with `durability=sync` (acks=all waits for a group fsync); Kafka with
  `log.flush.interval.messages=1` (an fsync after every append, before the answer).

Apache Kafka (the version `scripts/apache-kafka.sh` cached) runs as one combined
broker+controller node with the JVM options of Kafka's own start script (`-Xmx1G -Xms1G`,
G1) and Kafka's default thread counts. Each mode runs one case, 1 KB records to a fresh
topic of 4 partitions with acks=all, with two clients:

- `confluent`: the confluent-kafka Producer/Consumer of `broker_bench.py` (the same
  settings against both brokers);
- `java-perf`: Kafka's own `ProducerPerformance` / `ConsumerPerformance`
  (kafka-producer-perf-test / kafka-consumer-perf-test) with `acks=all` and otherwise
  their defaults, run with `java -cp <cached class path>` and `-Xmx512M` as their scripts.

After one unrecorded `--warmup-mb` confluent run against each broker (so Kafka's JIT
has compiled its hot paths), runs alternate ours, Kafka, ours, Kafka (`--repeats` pairs per client and mode). MB is
10^6 bytes of record values. Java consume MB/s is the tool's `fetch.nMsg.sec` (group
join excluded). "cpu ms/MB" is the broker process's user+system CPU (from /proc) per MB
moved; the summary shows medians and the ratio ours/Kafka of the median MB/s. The consumer
reports its own view of the fetches: how many it sent, and their mean round trip (send to
whole response received: librdkafka's statistics, ConsumerPerformance's `--print-metrics`
`fetch-latency-avg`).

    .venv/bin/python benchmarks/kafka_vs_bundled_bench.py [--mb 200] [--repeats 2] [--warmup-mb 50]
        [--modes interval,sync] [--clients confluent,java-perf] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from broker_bench import cpu_seconds, create_topic, run_case

from streams.broker.launcher import BrokerProcess
from tests.support.apache_kafka import ApacheKafka, ApacheKafkaError

CASE = "1kb-p4-acksall"
RECORD_SIZE = 1024
PARTITIONS = 4
MODES = ("interval", "sync")
CLIENTS = ("confluent", "java-perf")
# KAFKA_HEAP_OPTS and KAFKA_JVM_PERFORMANCE_OPTS of bin/kafka-server-start.sh and
# bin/kafka-run-class.sh.
JVM_PERFORMANCE = (
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15",
    "-Djava.awt.headless=true",
)
KAFKA_JVM = ("-Xmx1G", "-Xms1G", *JVM_PERFORMANCE)
TOOL_JVM = ("-Xmx512M", *JVM_PERFORMANCE, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")
# The test launcher trims Kafka's threads for a shared machine; the benchmark restores
# Kafka's defaults (num.network.threads=3, num.io.threads=8, background.threads=10).
KAFKA_DEFAULTS = {"num.network.threads": "3", "num.io.threads": "8", "background.threads": "10"}
KAFKA_MODE = {"interval": {}, "sync": {"log.flush.interval.messages": "1"}}


class BenchError(Exception):
    """A perf tool failed or printed something the benchmark cannot read."""


@dataclass
class Row:
    mode: str
    client: str
    target: str
    repeat: int
    produce_mb_s: float
    consume_mb_s: float
    produce_cpu_ms_per_mb: float | None
    consume_cpu_ms_per_mb: float | None
    client_produce_cpu_ms_per_mb: float
    client_consume_cpu_ms_per_mb: float
    consume_fetches: int | None
    consume_rtt_ms: float | None


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _tool(classpath: str, main: str, *args: str) -> str:
    cmd = ["java", *TOOL_JVM, "-cp", classpath, main, *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        raise BenchError(
            f"`{main}` exited with status {done.returncode}:\n"
            f"{done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    return done.stdout


def _producer_rate(out: str) -> float:
    """Records/s from ProducerPerformance's summary line."""
    found = re.findall(r"(\d+) records sent, ([\d.]+) records/sec", out)
    if not found:
        raise BenchError(f"no `records sent, ... records/sec` summary in:\n{out[-2000:]}")
    return float(found[-1][1])


def _consumer_rate(out: str) -> float:
    """Records/s (fetch.nMsg.sec: group join excluded) from ConsumerPerformance's output."""
    lines = [line for line in out.splitlines() if line.strip()]
    for i, line in enumerate(lines[:-1]):
        header = [h.strip() for h in line.split(",")]
        if "fetch.nMsg.sec" in header:
            values = [v.strip() for v in lines[i + 1].split(",")]
            return float(values[header.index("fetch.nMsg.sec")])
    raise BenchError(f"no `fetch.nMsg.sec` column in:\n{out[-2000:]}")


def _consumer_metric(out: str, name: str) -> float | None:
    """A `consumer-fetch-manager-metrics` value from ConsumerPerformance's --print-metrics."""
    found = re.search(rf"consumer-fetch-manager-metrics:{name}:\{{[^}}]*\}}\s*:\s*([\d.]+)", out)
    return float(found.group(1)) if found else None


def java_case(bootstrap: str, pid: int, classpath: str, mb: float) -> dict[str, float | None]:
    n = int(mb * 1024 * 1024 / RECORD_SIZE)
    volume = n * RECORD_SIZE / 1e6
    topic = f"bench-java-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, PARTITIONS)
    c0, k0 = cpu_seconds(pid), _children_cpu()
    out = _tool(
        classpath,
        "org.apache.kafka.tools.ProducerPerformance",
        *("--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(n)),
        *("--record-size", str(RECORD_SIZE), "--throughput", "-1"),
        *("--command-property", "acks=all"),
    )
    produce = _producer_rate(out)
    c1, k1 = cpu_seconds(pid), _children_cpu()
    out = _tool(
        classpath,
        "org.apache.kafka.tools.ConsumerPerformance",
        *("--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(n)),
        *("--group", f"bench-{uuid.uuid4().hex[:6]}", "--timeout", "60000"),
        "--print-metrics",
    )
    consume = _consumer_rate(out)
    c2, k2 = cpu_seconds(pid), _children_cpu()

    def per_mb(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else round((b - a) * 1000 / volume, 2)

    return {
        "produce_mb_s": round(produce * RECORD_SIZE / 1e6, 1),
        "consume_mb_s": round(consume * RECORD_SIZE / 1e6, 1),
        "produce_cpu_ms_per_mb": per_mb(c0, c1),
        "consume_cpu_ms_per_mb": per_mb(c1, c2),
        # JVM start and JIT included
        "client_produce_cpu_ms_per_mb": round((k1 - k0) * 1000 / volume, 2),
        "client_consume_cpu_ms_per_mb": round((k2 - k1) * 1000 / volume, 2),
        # the consumer's own metrics: Fetch responses, mean send-to-response time
        "consume_fetches": int(_consumer_metric(out, "fetch-total") or 0) or None,
        "consume_rtt_ms": _consumer_metric(out, "fetch-latency-avg"),
    }


def confluent_case(bootstrap: str, pid: int, _classpath: str, mb: float) -> dict[str, float | None]:
    r = run_case(bootstrap, "", CASE, mb, pid)
    return {
        k: getattr(r, k)
        for k in (
            "produce_mb_s",
            "consume_mb_s",
            "produce_cpu_ms_per_mb",
            "consume_cpu_ms_per_mb",
            "client_produce_cpu_ms_per_mb",
            "client_consume_cpu_ms_per_mb",
            "consume_fetches",
            "consume_rtt_ms",
        )
    }


RUNNERS: dict[str, Callable[[str, int, str, float], dict[str, float | None]]] = {
    "confluent": confluent_case,
    "java-perf": java_case,
}


def run_mode(
    mode: str, clients: list[str], mb: float, repeats: int, warmup_mb: float, tmp: Path
) -> list[Row]:
    rows: list[Row] = []
    ours = BrokerProcess(tmp / f"ours-{mode}", config={"durability": mode})
    kafka = ApacheKafka(
        tmp / f"kafka-{mode}",
        overrides={**KAFKA_DEFAULTS, **KAFKA_MODE[mode]},
        jvm_options=KAFKA_JVM,
    )
    try:
        ours.start()
        kafka.start()
        assert ours.pid is not None
        targets = (("ours", ours.bootstrap, ours.pid), ("kafka", kafka.bootstrap, kafka.pids[0]))
        if warmup_mb > 0:  # not recorded: lets Kafka's JIT reach steady state first
            for _target, bootstrap, pid in targets:
                confluent_case(bootstrap, pid, kafka.classpath, warmup_mb)
        for repeat in range(repeats):
            for client in clients:
                for target, bootstrap, pid in targets:
                    figures = RUNNERS[client](bootstrap, pid, kafka.classpath, mb)
                    rows.append(Row(mode, client, target, repeat, **figures))  # type: ignore[arg-type]
                    print(_row(rows[-1]), flush=True)
    finally:
        try:
            ours.stop()
        finally:
            kafka.stop()
    return rows


def _row(r: Row) -> str:
    return (
        f"{r.mode:8s} {r.client:9s} {r.target:5s} #{r.repeat} produce {r.produce_mb_s:6.1f} MB/s"
        f" consume {r.consume_mb_s:6.1f} MB/s | broker cpu ms/MB {r.produce_cpu_ms_per_mb}"
        f" / {r.consume_cpu_ms_per_mb} | client cpu ms/MB {r.client_produce_cpu_ms_per_mb}"
        f" / {r.client_consume_cpu_ms_per_mb} | consume: {r.consume_fetches} fetches,"
        f" {r.consume_rtt_ms} ms round trip"
    )


def summary(rows: list[Row]) -> list[str]:
    """A markdown table: medians per mode, client and side, and the ratios ours/Kafka."""

    def med(mode: str, client: str, target: str, field: str) -> float:
        values = [
            getattr(r, field)
            for r in rows
            if (r.mode, r.client, r.target) == (mode, client, target)
            and getattr(r, field) is not None
        ]
        return statistics.median(values) if values else float("nan")

    out = [
        "| mode | client | produce MB/s ours / Kafka | ratio | consume MB/s ours / Kafka "
        "| ratio | broker CPU ms/MB produce: ours / Kafka | consume: ours / Kafka "
        "| fetches per run: ours / Kafka | fetch round trip ms: ours / Kafka |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    seen = dict.fromkeys((r.mode, r.client) for r in rows)
    for mode, client in seen:
        f = {
            (t, k): med(mode, client, t, k)
            for t in ("ours", "kafka")
            for k in (
                "produce_mb_s",
                "consume_mb_s",
                "produce_cpu_ms_per_mb",
                "consume_cpu_ms_per_mb",
                "consume_fetches",
                "consume_rtt_ms",
            )
        }
        p_o, p_k = f["ours", "produce_mb_s"], f["kafka", "produce_mb_s"]
        c_o, c_k = f["ours", "consume_mb_s"], f["kafka", "consume_mb_s"]
        out.append(
            f"| {mode} | {client} | {p_o:.1f} / {p_k:.1f} | {p_o / p_k:.2f} "
            f"| {c_o:.1f} / {c_k:.1f} | {c_o / c_k:.2f} "
            f"| {f['ours', 'produce_cpu_ms_per_mb']:.2f} / {f['kafka', 'produce_cpu_ms_per_mb']:.2f} "
            f"| {f['ours', 'consume_cpu_ms_per_mb']:.2f} / {f['kafka', 'consume_cpu_ms_per_mb']:.2f} "
            f"| {f['ours', 'consume_fetches']:.0f} / {f['kafka', 'consume_fetches']:.0f} "
            f"| {f['ours', 'consume_rtt_ms']:.1f} / {f['kafka', 'consume_rtt_ms']:.1f} |"
        )
    return out


def _choose(
    parser: argparse.ArgumentParser, flag: str, given: str, allowed: tuple[str, ...]
) -> list[str]:
    names = [x for x in given.split(",") if x]
    unknown = [x for x in names if x not in allowed]
    if unknown or not names:
        parser.error(f"{flag} `{given}`: expected a comma-separated subset of {list(allowed)}")
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=200, help="megabytes per run (default 200)")
    parser.add_argument("--repeats", type=int, default=2, help="ours/Kafka pairs per client (2)")
    parser.add_argument(
        "--warmup-mb", type=float, default=50, help="unrecorded run per broker first (50)"
    )
    parser.add_argument("--modes", default=",".join(MODES), help="interval,sync")
    parser.add_argument("--clients", default=",".join(CLIENTS), help="confluent,java-perf")
    parser.add_argument("--json", type=Path, help="also write every run here")
    args = parser.parse_args(argv)
    modes = _choose(parser, "--modes", args.modes, MODES)
    clients = _choose(parser, "--clients", args.clients, CLIENTS)
    if args.repeats < 1:
        parser.error(f"--repeats `{args.repeats}`: expected 1 or more")

    load_start = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rows: list[Row] = []
    try:
        with tempfile.TemporaryDirectory(prefix="kafka-vs-bundled-") as tmp:
            for mode in modes:
                rows += run_mode(mode, clients, args.mb, args.repeats, args.warmup_mb, Path(tmp))
    except (ApacheKafkaError, BenchError) as e:
        print(f"kafka_vs_bundled_bench: {e}", file=sys.stderr)
        return 1
    load_end = os.getloadavg()
    print(
        f"\n{started}, {args.mb:g} MB per run, {args.repeats} pair(s); load average "
        f"(1/5/15 min) at start {load_start[0]:.1f}/{load_start[1]:.1f}/{load_start[2]:.1f}, "
        f"at end {load_end[0]:.1f}/{load_end[1]:.1f}/{load_end[2]:.1f}\n"
    )
    print("\n".join(summary(rows)))
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "started": started,
                    "load": [load_start, load_end],
                    "runs": [asdict(r) for r in rows],
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
