"""Kafka -> Delta under SIGKILL: no loss, no duplicate, by Kafka coordinates and by key,
on both engines (append, upsert and SCD2 tables fed by a CDC stream with deletes and late
changes, and an append through the Arrow path): the scenario of scenario.py with the child
in a local session on the bundled broker, at least MIN_KILLS kills.

It runs with the checkpoint and the tables on the local disk and on S3 (a real S3-API
server, tests/support/s3.py); on S3 with fewer kills (`MIN_KILLS_S3`), as every life there
starts another JVM against the same server and the local runs cover the kill points.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import streams.storage as storage
from tests.integration.crash.scenario import Lives, sigkill_anywhere

pytestmark = [pytest.mark.slow, pytest.mark.kafka, pytest.mark.spark, pytest.mark.timeout(3000)]

MIN_KILLS = 20
MIN_KILLS_S3 = 6


def test_sigkill_anywhere_loses_and_repeats_nothing(
    broker, unique, tmp_path: Path, where: str, engine: str
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    min_kills = MIN_KILLS if storage.is_local(where) else MIN_KILLS_S3
    sigkill_anywhere(broker.bootstrap, unique("crash"), where, engine, logs, Lives(min_kills))
