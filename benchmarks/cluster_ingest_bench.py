"""The ingest on the cluster shape: executors on two workers, tables on S3, three Kafka nodes.

    flock /tmp/cluster-shape.lock .venv/bin/python benchmarks/cluster_ingest_bench.py \\
        [--sizes 100000,1100000] [--engines python,native] [--partitions 4] [--rounds 1] [--bytecode cached] [--logs DIR] \\
        [--fetch "default;queued.max.messages.kbytes=16384"] [--checkouts "main=../main;branch=."]

Starts what tests/integration/cluster/test_cluster_shape.py runs on: a Spark standalone
master with two workers (1 core, 1 GiB each; `tests/integration/cluster/standalone.py`),
the S3-API server (`tests/support/s3.py`, the AWS variables in this process's environment
and so in the daemons', which the executors inherit) and a three-node Apache Kafka
cluster (`tests/support/apache_kafka.py`, replication factor 3). For each size, a topic
of that many JSON records as `kafka_ingest_sizes.py` makes them (one in a thousand cut
off, one in a thousand with a null `order_id`), then in one run on that topic: (k) kcat
(`kcat -C -e -o beginning`, the fastest of three reads), and on each engine (q) an ODS
table with `expect_column_values_to_not_be_null: {column: order_id}, on_violation:
quarantine` in a fresh project whose `warehouse_root` is a new folder of the bucket,
run by `spark-submit warehouse/submit.py --layer ods --env cluster --once` in client
mode (the driver here, one executor on each worker), as the cluster test submits it.

The table's time is the sum of its batches' times from the driver's log (`table
ods_bench: batch N (Arrow): ... 1.2s`: the batch's write, from its DataFrame to its
commits), without the application's start; the whole submit's wall time is printed
beside it. Per case the marginal rate between the smallest and the largest size,
(large - small) / (t_large - t_small), and its ratio to kcat's marginal rate in the same
run (docs/decisions/0004). After each run (not timed) the table and its quarantine are
read back from S3 and checked record by record (`kafka_ingest_sizes.verify`). Not a
test: nothing is asserted. With `--rounds N` each case runs N times, the cases taking turns
(every other round in the reverse order), and its fastest round counts. Each run also prints where its batches' time went, from
the landing path's lines in the driver's log (`breakdown`). `--logs DIR` keeps each
submit's driver log and Spark's event log (every task's metrics) in DIR. `--bytecode
source` runs the applications as the shape ran without its byte code cache (every Python
process compiling its imports), `both` beside the cached runs, taking turns. `--fetch`
runs each case with each of its `;`-separated librdkafka settings (`k=v,k=v` in the
project's `kafka: client:`, over the fetch's own, `streams.kafka.fetch.consumer_config`;
`default`: none), taking turns. `--checkouts` runs each case with each of its
`;`-separated `label=folder` checkouts of the project as the applications' code (the
driver's and the executors' `PYTHONPATH`), taking turns on the same cluster and topic.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
import uuid
from itertools import product
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from ingest_runs import run_kcat  # noqa: E402
from kafka_ingest_sizes import NOT_NULL, SCHEMA, produce, verify  # noqa: E402

BATCH = re.compile(r"table ods_bench: batch \d+(?: \(([^)]*)\))?: (\d+) rows in, .* ([\d.]+)s$")
"""The runner's line per batch: the strategy (absent: the persisted path), rows, seconds."""
TASKS = re.compile(r"batch \d+: \d+ Arrow task\(s\), job ([\d.]+)s: (.*); (\d+) file\(s\)")
"""The landing path's line per batch: the tasks' job, each task's split, files written."""
TASK = re.compile(
    r"\[\d+ rec, fetch ([\d.]+) type ([\d.]+) judge ([\d.]+) stage ([\d.]+) write ([\d.]+) "
    r"= ([\d.]+)s from \+(-?[\d.]+)s, cpu ([\d.]+)s\]"
)
PARTS = ("fetch", "type", "judge", "stage", "write", "task", "start", "cpu")
COMMIT = re.compile(r"batch \d+: Arrow fallback ([\d.]+)s, commit ([\d.]+)s")
READER = re.compile(
    r"of (\d+) task\(s\) in a started Python worker, (\d+) read Kafka with the column reader"
)
"""The landing path's line per batch: its tasks, and how many read with the C column reader."""


def breakdown(log: str, seconds: float) -> dict[str, float]:
    """Where the batches' `seconds` went, summed over batches, from the driver's `log`: the
    tasks' job; in its last task to end, each part of `PARTS` (`write` is the task's
    rest: the Parquet files' encoding and upload; `start`, when its code began after the
    job's start: scheduling, Python worker start-up, unpickling, imports; `cpu`, its
    Python worker's CPU time, librdkafka's threads included); the fallback's parse and the
    held rows' read (`fallback`), the table's commit, and the rest of the batch (`driver`:
    planning, the quarantine's files and commit, the quality events); the tasks, and how
    many read Kafka with the C column reader (`tasks`, `column_reader`)."""
    out = dict.fromkeys(("job", *PARTS, "files", "fallback", "commit"), 0.0)
    for m in TASKS.finditer(log):
        out["job"] += float(m.group(1))
        out["files"] += int(m.group(3))
        tasks = [tuple(map(float, t)) for t in TASK.findall(m.group(2))]
        if tasks:
            slowest = max(tasks, key=lambda t: t[-3] + t[-2])
            for name, value in zip(PARTS, slowest, strict=True):
                out[name] += value
    out["tasks"] = out["column_reader"] = 0.0
    for m in READER.finditer(log):
        out["tasks"] += int(m.group(1))
        out["column_reader"] += int(m.group(2))
    for m in COMMIT.finditer(log):
        out["fallback"] += float(m.group(1))
        out["commit"] += float(m.group(2))
    out["driver"] = seconds - out["job"] - out["fallback"] - out["commit"]
    return out


def describe(split: dict[str, float]) -> str:
    return (
        f"job {split['job']:.1f} s (last task from +{split['start']:.1f} s, "
        f"{split['task']:.1f} s, CPU {split['cpu']:.1f} s: fetch "
        f"{split['fetch']:.1f}, type {split['type']:.2f}, judge {split['judge']:.2f}, stage "
        f"{split['stage']:.2f}, write {split['write']:.2f}; {split['files']:.0f} files; "
        f"{split['column_reader']:.0f} of {split['tasks']:.0f} tasks read with the column reader), "
        f"fallback {split['fallback']:.2f} s, commit {split['commit']:.2f} s, "
        f"driver's rest {split['driver']:.2f} s"
    )


def project_dir(
    base: Path, root: str, bootstrap: str, client: dict[str, str] | None = None
) -> Path:
    """A project of one ODS table, `ods_bench`, reading `TOPIC` with the quarantining
    not-null expectation; `conf/cluster.yml` on `root` and `bootstrap`, with the
    librdkafka settings `client`."""
    import json

    base.mkdir(parents=True)
    (base / "conf").mkdir()
    (base / "conf" / "cluster.yml").write_text(
        f"warehouse_root: {root}\n"
        f'kafka:\n  bootstrap: "{bootstrap}"\n  security: {{protocol: PLAINTEXT}}\n'
        f"  client: {json.dumps(client or {})}\n"
        "engines: {kafka: auto, delta: auto}\n"
    )
    (base / "schemas").mkdir()
    (base / "schemas" / "bench.json").write_text(json.dumps(SCHEMA))
    ods = base / "layers" / "ods"
    ods.mkdir(parents=True)
    (ods / "bench.yml").write_text(
        "table: ods_bench\n"
        "source:\n  kafka: {topic: TOPIC, starting_offsets: earliest, format: json, "
        "schema: bench}\n"
        f"sink: {{mode: append}}\n{NOT_NULL}"
    )
    return base


def run_case(
    cluster,
    base: Path,
    engine: str,
    topic: str,
    records: int,
    partitions: int,
    *,
    where: str,
    logs: Path | None = None,
    round_: int = 0,
    bytecode: str = "cached",
    fetch: tuple[str, dict[str, str]] = ("default", {}),
    checkout: tuple[str, Path | None] = ("", None),
):
    """(q) on `engine` over `topic` (`where`: bucket and bootstrap), its tables in a new
    folder of the bucket: (seconds in batches, submit seconds, strategies, batches, check)."""
    from tests.integration.cluster.jobs import (
        conf_args,
        engine_conf,
        failure,
        storage_conf,
        submit,
    )
    from warehouse import Project

    bucket, bootstrap = where
    label, client = fetch
    folder = re.sub(r"[^\w.-]+", "_", label) if label != "default" else ""
    name = "-".join(
        filter(None, (engine, str(records), bytecode, folder, checkout[0], str(round_)))
    )
    root = f"s3a://{bucket}/{name}-{uuid.uuid4().hex[:6]}"
    project = project_dir(base / name, root, bootstrap, client)
    yml = project / "layers" / "ods" / "bench.yml"
    yml.write_text(yml.read_text().replace("TOPIC", topic))
    conf = {**engine_conf(engine), **storage_conf()}
    if logs is not None:
        conf |= {
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": logs.as_uri(),
            "spark.eventLog.compress": "false",
        }
    env = {k: v for k, v in cluster.env.items() if not k.startswith("WAREHOUSE")}
    if bytecode == "source":
        # As the shape ran before it kept a byte code cache: every Python process
        # compiles what it imports (an empty cache folder, nothing written to it).
        empty = base / f"{name}-no-pycache"
        empty.mkdir()
        source = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": str(empty)}
        env |= source
        conf |= {f"spark.executorEnv.{k}": v for k, v in source.items()}
    if checkout[1] is not None:
        env["PYTHONPATH"] = str(checkout[1])
        conf["spark.executorEnv.PYTHONPATH"] = str(checkout[1])
    extra = conf_args(conf)
    t0 = time.perf_counter()
    run = submit(cluster, project, "ods", env, *extra, cwd=base, verbose=True)
    wall = time.perf_counter() - t0
    if logs is not None:
        (logs / f"{name}.driver.log").write_text(run.stdout + run.stderr)
    if run.returncode != 0:
        raise SystemExit(f"{engine}, {records:,}: {failure(run)}")
    batches = [m.groups() for m in map(BATCH.search, run.stdout.splitlines()) if m]
    seconds = sum(float(s) for _, _, s in batches)
    rows = sum(int(n) for _, n, _ in batches)
    if rows != records:
        raise SystemExit(f"{engine}, {records:,}: the batches read {rows:,} records")
    paths = sorted({p or "cached" for p, _, _ in batches})
    checked = verify(Project.load(project, env="cluster"), records, partitions, expect=True)
    return seconds, wall, paths, len(batches), checked, breakdown(run.stdout, seconds)


def case_name(engine: str, bytecode: str, fetch: str, checkout: str) -> str:
    """`engine/bytecode`, then the fetch settings and the checkout where they are not the
    default."""
    return "/".join(
        [engine, bytecode] + [fetch] * (fetch != "default") + [checkout] * bool(checkout)
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="100000,1100000")
    p.add_argument("--engines", default="python,native")
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--size", type=int, default=200, help="bytes per record, roughly")
    p.add_argument(
        "--rounds", type=int, default=1, help="runs of each case, engines alternating; fastest"
    )
    p.add_argument(
        "--bytecode",
        default="cached",
        help="cached (the shape's byte code cache), source (every process compiles its "
        "imports), or both, taking turns",
    )
    p.add_argument(
        "--fetch",
        default="default",
        help="`;`-separated librdkafka settings, each `k=v,k=v` or `default`, taking turns",
    )
    p.add_argument(
        "--checkouts",
        default="",
        help="`;`-separated `label=folder` checkouts whose code the applications run, taking turns",
    )
    p.add_argument(
        "--logs",
        type=Path,
        help="keep each submit's driver log and Spark event log in this folder",
    )
    args = p.parse_args()
    if args.logs is not None:
        args.logs = args.logs.resolve()
        args.logs.mkdir(parents=True, exist_ok=True)
    sizes = [int(s) for s in args.sizes.split(",")]
    engines = args.engines.split(",")
    variants = ["source", "cached"] if args.bytecode == "both" else [args.bytecode]
    fetches = [
        (v, dict(kv.split("=", 1) for kv in v.split(",")) if v != "default" else {})
        for v in args.fetch.split(";")
    ]
    checkouts: list[tuple[str, Path | None]] = [
        (label, Path(folder).resolve())
        for label, folder in (c.split("=", 1) for c in args.checkouts.split(";") if c)
    ] or [("", None)]

    from tests.integration.cluster.standalone import StandaloneCluster
    from tests.support import s3
    from tests.support.apache_kafka import ApacheKafka

    work = Path(tempfile.mkdtemp(prefix="cluster-ingest-bench-"))
    server = s3.plan()  # the AWS variables in this process, and so in the daemons'
    os.environ["WAREHOUSE_ROOT"] = "unused"  # conf/cluster.yml of the projects names it
    server.start()
    kafka = ApacheKafka(work / "kafka", nodes=3).start()
    try:
        with StandaloneCluster(work / "cluster", workers=2) as cluster:
            bucket = server.create_bucket(f"bench-{uuid.uuid4().hex[:8]}")
            bootstrap = kafka.bootstrap
            print(f"cluster {cluster.url}, kafka {bootstrap}, bucket {bucket}", flush=True)
            kcat: dict[int, float] = {}
            took: dict[tuple[str, int], float] = {}
            for records in sizes:
                topic = f"bench-{records}-{uuid.uuid4().hex[:6]}"
                produce(bootstrap, topic, records, args.size, args.partitions)
                dt = run_kcat(bootstrap, topic, records, runs=3)
                if dt is None:
                    raise SystemExit("kcat is not installed: no baseline")
                kcat[records] = dt
                cases = list(product(engines, variants, fetches, checkouts))
                for r in range(args.rounds):
                    # Every other round in the reverse order: a load that rises or falls
                    # during the run favours no case.
                    for engine, bytecode, fetch, checkout in cases[:: -1 if r % 2 else 1]:
                        seconds, wall, paths, n, checked, split = run_case(
                            cluster,
                            work,
                            engine,
                            topic,
                            records,
                            args.partitions,
                            where=(bucket, bootstrap),
                            logs=args.logs,
                            round_=r,
                            bytecode=bytecode,
                            fetch=fetch,
                            checkout=checkout,
                        )
                        case = case_name(engine, bytecode, fetch[0], checkout[0])
                        key = (case, records)
                        took[key] = min(took.get(key, seconds), seconds)
                        print(
                            f"(q) {case:>14}, {records:>10,}, round {r + 1}: "
                            f"{records / seconds:>10,.0f} rows/s in batches ({n} batch(es), "
                            f"{'/'.join(paths)}, {seconds:.1f} s), submit {wall:.1f} s; "
                            f"{checked}\n    {describe(split)}",
                            flush=True,
                        )
            small, large = min(sizes), max(sizes)
            if small == large:
                return
            k = (large - small) / (kcat[large] - kcat[small])
            print(f"marginal {small:,} -> {large:,}: (k) kcat {k:,.0f} rows/s", flush=True)
            for engine, bytecode, fetch, checkout in product(engines, variants, fetches, checkouts):
                case = case_name(engine, bytecode, fetch[0], checkout[0])
                dt = took[(case, large)] - took[(case, small)]
                rate = (large - small) / dt
                print(
                    f"  (q) {case}: {took[(case, large)]:.1f} s at {large:,}, "
                    f"{rate:,.0f} rows/s, to (k) {rate / k:.2f}",
                    flush=True,
                )
    finally:
        kafka.stop()
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(server.folder, ignore_errors=True)


if __name__ == "__main__":
    main()
