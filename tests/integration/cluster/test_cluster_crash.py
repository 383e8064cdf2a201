"""The crash test on the cluster shape: the scenario of tests/integration/crash/scenario.py
(append, upsert with tombstones and SCD2 tables from a CDC feed with deletes and late
changes, and an append through the Arrow path; 0 lost, 0 duplicated, by Kafka coordinates
and by key, then the checkpoint deleted and the run resumed from the offsets the tables
recorded) with the child as the driver of an application on the standalone cluster's two
workers, its topic on the three Kafka nodes, its tables and checkpoint on the S3 server.

The driver's process group is SIGKILLed at least `MIN_DRIVER_KILLS` times, at armed crash
points (right before / right after a Delta commit) and at random moments after its query
started; and at least `MIN_EXECUTOR_KILLS` times, while a batch runs, one of the
application's executors (a `CoarseGrainedExecutorBackend` JVM under a worker) is
SIGKILLed: Spark runs its tasks again on the other executor and on the one the master
launches in its place, and the run goes on.

As in test_cluster_shape.py, the AWS variables reach the workers' daemons (and through them
the executors) and the driver through the environment only; the endpoint, path-style
addressing and the class path of Hadoop's S3 connector are Spark settings.

This test covers what the crash test's runs on S3 in a local session covered (tables and
checkpoint on S3, both engines, the same checks, more kills) on the shape users run on
S3, so those runs are dropped: tests/integration/crash/test_kill_restart.py keeps the
local disk and its 20 kills per engine, which cover the kill points
(docs/decisions/0046-crash-test-on-s3-runs-on-the-cluster-shape.md).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.cluster.class_archives import ClusterArchives, archive_conf
from tests.integration.cluster.executors import executor_pids
from tests.integration.cluster.jobs import application_conf, storage_conf
from tests.integration.cluster.standalone import StandaloneCluster
from tests.integration.crash.child import APP_ID_MARKER
from tests.integration.crash.scenario import Lives, crash_seed, sigkill_anywhere
from tests.support.apache_kafka import ApacheKafka

pytestmark = [
    pytest.mark.spark,
    pytest.mark.kafka,
    pytest.mark.s3,
    pytest.mark.slow,
    pytest.mark.timeout(3600),
]

MIN_DRIVER_KILLS = 10
MIN_EXECUTOR_KILLS = 5
# A driver's life on the cluster waits for executors on the workers before its first
# batch runs: timer kills land over a longer span than in a local session.
TIMER_S = 10.0
BATCH_RUNS = "foreachBatch called"
LOST = "Lost executor"
"""What the driver logs when an executor's exit reaches it (the scheduler's ERROR line)."""


class ExecutorKiller:
    """Beside a driver's life: once its application id is logged and a batch runs, a random
    0-2 s later SIGKILLs one of its executors, until `want` were killed and the driver,
    still alive, logged the loss (`LOST`) and went on. Concurrency: called by one life's
    thread at a time."""

    def __init__(self, want: int, rng: random.Random) -> None:
        self.want, self.rng = want, rng
        self.killed: list[tuple[str, int]] = []

    def done(self) -> bool:
        return len(self.killed) >= self.want

    def __call__(self, log: Path, proc: subprocess.Popen) -> None:
        if self.done():
            return
        app_id = _wait_for(log, proc, lambda text: APP_ID_MARKER in text and BATCH_RUNS in text)
        if app_id is None:
            return
        app_id = app_id.split(APP_ID_MARKER, 1)[1].split()[0]
        time.sleep(self.rng.uniform(0.0, 2.0))
        pids = executor_pids(app_id)
        if not pids or proc.poll() is not None:
            return
        lost = log.read_text(errors="replace").count(LOST)
        pid = self.rng.choice(pids)
        os.kill(pid, signal.SIGKILL)
        if _wait_for(log, proc, lambda text: text.count(LOST) > lost) is not None:
            self.killed.append((app_id, pid))


def _wait_for(log: Path, proc: subprocess.Popen, seen: Callable[[str], bool]) -> str | None:
    """The log's text once `seen` holds of it while `proc` lives; None when `proc` ended."""
    while proc.poll() is None:
        text = log.read_text(errors="replace")
        if seen(text):
            return text
        time.sleep(0.2)
    return None


def test_driver_and_executors_sigkilled_lose_and_repeat_nothing(
    cluster: StandaloneCluster,
    cluster_archives: ClusterArchives | None,
    apache_kafka_cluster: ApacheKafka,
    s3_root: str,
    engine: str,
    unique,
    tmp_path: Path,
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    seed = crash_seed()  # the executor kills' delays replay with the driver's kill choices
    killer = ExecutorKiller(MIN_EXECUTOR_KILLS, random.Random(f"executors-{seed}"))
    lives = Lives(
        MIN_DRIVER_KILLS,
        timer_s=TIMER_S,
        env=cluster.env,
        beside=killer,
        beside_done=killer.done,
    )
    child = {
        "master": cluster.url,
        "spark_conf": {
            **application_conf(cluster),
            **storage_conf(),
            # The child's driver keeps its C1-only JIT (docs/decisions/0045).
            **archive_conf(cluster_archives, driver_flags=("-XX:TieredStopAtLevel=1",)),
        },
        # `python` puts no native jars on the class path, as its users submit it.
        "native_jars": engine == "native",
    }
    kills = sigkill_anywhere(
        apache_kafka_cluster.bootstrap,
        unique("crash"),
        s3_root,
        engine,
        logs,
        lives,
        child=child,
        seed=seed,
    )
    assert kills >= MIN_DRIVER_KILLS
    assert len(killer.killed) >= MIN_EXECUTOR_KILLS, killer.killed
