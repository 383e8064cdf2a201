"""`warehouse generate` as a user runs it: a subprocess producing to a real broker process."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from streams.kafka.admin import end_offsets
from warehouse.generate import generate

pytestmark = [pytest.mark.kafka]

REPO = Path(__file__).resolve().parents[3]


def test_generate_produces_exactly_the_generators_records(broker_factory, tmp_path: Path) -> None:
    broker = broker_factory()
    env = {
        **os.environ,
        "WAREHOUSE__KAFKA__BOOTSTRAP": broker.bootstrap,
        "WAREHOUSE__WAREHOUSE_ROOT": str(tmp_path / "wh"),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "warehouse",
            "--project",
            str(REPO),
            "generate",
            "--events",
            "400",
            "--seed",
            "5",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    expected = Counter(r.topic for r in generate(400, seed=5))
    offsets = end_offsets(broker.bootstrap, sorted(expected))
    assert {t: sum(p.values()) for t, p in offsets.items()} == dict(expected)
    assert f"produced {sum(expected.values())} records" in done.stdout
