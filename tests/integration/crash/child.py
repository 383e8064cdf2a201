"""The process the crash tests kill: a Kafka -> Delta query (append, upsert and SCD2 tables).

The topic is a CDC feed: each record's `op` (`d` deletes its key) and `seq` feed the
upsert (SCD1, with tombstones) and SCD2 tables; the upsert table also gets late changes,
older than one its key already had, which it must drop.

Run as `python child.py '<json params>'`. It reads the topic with the real
`streams.kafka.read_kafka_stream` and writes every micro-batch through
`streams.delta.write_batch` into three tables, exactly as the runtime does, on the
engine `params["engine"]` (`python` or `native`), and through the Arrow path
(`streams.landing`, reading the ranges either engine's source planned) into a fourth:
app id
`<table>:<checkpoint query id>`, commit info with the batch's end offsets from the
checkpoint's offset log. Trigger.AvailableNow: it exits 0 when the topic is drained.
Crash points are armed by the parent through `WAREHOUSE_CRASH_POINT`.

The session is `local[2]`, or with `params["master"]` a driver of that cluster with
`params["spark_conf"]` over the defaults below (`params["native_jars"]`: whether the
session puts the cached native jars on its class path).
"""

from __future__ import annotations

import json
import logging
import os
import sys

STARTED_MARKER = "CRASH-CHILD-QUERY-STARTED"
APP_ID_MARKER = "CRASH-CHILD-APP-ID "
"""Followed by the Spark application's id, printed once the session runs."""


def main(params: dict) -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    log = logging.getLogger("crash-child")
    log.info("child python started")
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from streams.delta import (
        DeltaTarget,
        batch_end_offsets,
        checkpoint_query_id,
        remove_interrupted_writes,
        write_batch,
    )
    from streams.kafka import DEFAULT_BATCH_RECORDS, FetchOptions, read_kafka_stream
    from streams.landing import kafka_json_append, planned_partitions
    from warehouse.runtime.session import get_session
    from warehouse.spec.config import SparkSettings

    payload = StructType([StructField("i", LongType()), StructField("s", StringType())])
    log.info("imports done; starting the SparkSession")
    # Launched as the CLI launches its sessions (local defaults, compiled pyspark workers).
    # A life is a JVM start and a batch or two: the JIT's optimizing compiler (C2) would
    # compile start-up code for a process about to be killed; without it a life takes
    # less CPU (docs/decisions/0045-short-test-jvms-without-c2.md).
    conf = {
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1",
        "warehouse.logLevel": "ERROR",
    }
    master = params.get("master") or "local[2]"
    settings = SparkSettings(
        master=master,
        conf={**conf, **params.get("spark_conf", {})},
        native_jars=params.get("native_jars", True),
    )
    # A cluster's driver is given the storage jars' class path in `spark_conf`: as jars
    # of the session every executor would copy them.
    object_storage = "://" in params["checkpoint"] and "master" not in params
    spark = get_session(settings, app_name="crash-child", object_storage=object_storage)
    log.info("SparkSession ready")
    print(f"{APP_ID_MARKER}{spark.sparkContext.applicationId}", flush=True)
    ckpt = params["checkpoint"]
    engine = params["engine"]
    source = read_kafka_stream(
        spark,
        bootstrap=params["bootstrap"],
        topics=[params["topic"]],
        starting_offsets=params.get("starting_offsets") or "earliest",
        max_offsets_per_trigger=params["max_offsets_per_trigger"],
        engine=engine,
        checkpoint_location=ckpt,
    )
    value = F.col("value").cast("string")
    rows = source.select(
        F.col("key").cast("string").alias("k"),
        F.get_json_object(value, "$.seq").cast("long").alias("seq"),
        # The change's kind as a CDC feed gives it (`d` deletes the key), and whether
        # it is a late change: older than one its key already had.
        F.get_json_object(value, "$.op").alias("_op"),
        F.get_json_object(value, "$.late").cast("boolean").alias("late"),
        F.col("topic").alias("_topic"),
        F.col("partition").alias("_partition"),
        F.col("offset").alias("_offset"),
    )

    log.info("Kafka source loaded")
    first = params.get("starting_offsets") or {}

    def write(batch, batch_id: int) -> None:
        qid = checkpoint_query_id(ckpt)
        end = batch_end_offsets(ckpt, batch_id)
        start = (batch_end_offsets(ckpt, batch_id - 1) if batch_id else None) or first
        # The test topic has no gaps, so a batch must hold exactly end - start records
        # per partition; checking it here tells a source loss from a sink loss (batch 0
        # of a `latest` start has no start known here: the parent checks the tables).
        known = isinstance(start, dict)
        want = (
            sum(o - int(start.get(t, {}).get(p, 0)) for t, ps in end.items() for p, o in ps.items())
            if known
            else None
        )
        log.info("batch %d: foreachBatch called", batch_id)
        got = batch.count()
        if known and got != want:
            print(
                f"SOURCE-MISMATCH batch {batch_id}: the Kafka source returned {got} rows "
                f"for offsets {start} -> {end} ({want} records)",
                flush=True,
            )
            os._exit(3)
        info = {
            "warehouse.sourceOffsets": json.dumps(end),
            "warehouse.batchId": batch_id,
        }
        _arrow(batch, batch_id, info, qid)
        for name, target in (
            ("events", DeltaTarget(params["append_path"], app_id=f"events:{qid}", engine=engine)),
            (
                "latest",
                DeltaTarget(
                    params["upsert_path"],
                    mode="upsert",
                    keys=["k"],
                    sequence_by="seq",
                    app_id=f"latest:{qid}",
                    engine=engine,
                ),
            ),
            (
                "history",
                DeltaTarget(
                    params["scd2_path"],
                    mode="scd2",
                    keys=["k"],
                    sequence_by="seq",
                    app_id=f"history:{qid}",
                    engine=engine,
                ),
            ),
        ):
            # The SCD2 table gets the changes in order: a late change lands in its
            # history only when it shares a batch with the newer one it predates, so
            # what the table should hold would depend on where batches begin.
            rows = batch.filter(~F.col("late")) if name == "history" else batch
            write_batch(
                rows.drop("late"), batch_id, target, commit_info={**info, "warehouse.table": name}
            )

    def _arrow(batch, batch_id: int, info: dict, qid: str) -> None:
        # The Arrow path (streams.landing): reads the batch's planned ranges
        # itself; the records with a number in `s` go back to Spark's parse and their
        # files join the same commit.
        # Spark's own source plans bare ranges, read with the options the runtime
        # gives (`KafkaInput.fetch_options`); ours plans them with their options.
        fetch = FetchOptions(
            params["bootstrap"], {}, "read_committed", "fail", DEFAULT_BATCH_RECORDS
        )
        parts = planned_partitions(batch, fetch)
        if parts is None:
            print(f"NO-PLANNED-PARTITIONS batch {batch_id}", flush=True)
            os._exit(4)
        arrow = DeltaTarget(params["arrow_path"], app_id=f"arrow:{qid}", table="arrow")
        with kafka_json_append(
            spark,
            parts,
            arrow,
            batch_id,
            payload=payload,
            commit_info={**info, "warehouse.table": "arrow"},
        ) as done:
            if done is None or (done.bad is not None and done.bad.count()):
                print(f"ARROW-PATH-FAILED batch {batch_id}: {done}", flush=True)
                os._exit(5)

    remove_interrupted_writes(ckpt)  # as the runtime does before it starts a query
    writer = rows.writeStream.foreachBatch(write).option("checkpointLocation", ckpt)
    if params.get("continuous"):
        # Runs until killed. Batch 0 is the first trigger's: from the initial offsets to
        # what the source saw a moment later (records arriving in between).
        writer = writer.trigger(processingTime="1 second")
    else:
        writer = writer.trigger(availableNow=True)
    query = writer.start()
    log.info("streaming query started")
    print(STARTED_MARKER, flush=True)
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
