"""Kafka -> Delta under SIGKILL: no loss, no duplicate, by Kafka coordinates and by key,
on both engines (append, upsert and SCD2 tables fed by a CDC stream with deletes and late
changes, and an append through the Arrow path): the scenario of scenario.py with the child
in a local session on the bundled broker, the checkpoint and the tables on the local disk,
at least MIN_KILLS kills per engine, which cover the kill points.

The same scenario with the tables and the checkpoint on S3 (a real S3-API server,
tests/support/s3.py) runs on the cluster shape, both engines:
tests/integration/cluster/test_cluster_crash.py, the child there the driver of an
application on a standalone cluster's workers, with executors killed as well. It checks
all a local session's run on S3 would, on the shape users run on S3, so no local-session
run on S3 repeats it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.crash.scenario import Lives, sigkill_anywhere

pytestmark = [pytest.mark.slow, pytest.mark.kafka, pytest.mark.spark, pytest.mark.timeout(3000)]

MIN_KILLS = 20


def test_sigkill_anywhere_loses_and_repeats_nothing(
    broker, unique, tmp_path: Path, engine: str
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    where = str(tmp_path)
    sigkill_anywhere(broker.bootstrap, unique("crash"), where, engine, logs, Lives(MIN_KILLS))
