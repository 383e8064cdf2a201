"""How many queries a `--once` run runs at once, from `spark.concurrent_batches` and the
session's master (tests/integration/runtime/test_once_side_by_side.py runs them)."""

from __future__ import annotations

import os

import pytest

from warehouse.runtime.live import ONCE_SLOTS_ELSEWHERE, once_slots


@pytest.mark.parametrize(
    ("master", "slots"),
    [
        ("local", 1),
        ("local[3]", 3),
        ("local[3,2]", 3),  # local[threads,maxFailures]
        ("local[*]", os.cpu_count()),
        ("spark://10.0.0.5:7077", ONCE_SLOTS_ELSEWHERE),
        ("yarn", ONCE_SLOTS_ELSEWHERE),
        ("k8s://https://kube:443", ONCE_SLOTS_ELSEWHERE),
        (None, ONCE_SLOTS_ELSEWHERE),  # Spark Connect: the driver's master is not ours to read
    ],
)
def test_auto_is_a_local_masters_cores_and_two_elsewhere(master: str | None, slots: int) -> None:
    assert once_slots("auto", master) == slots


@pytest.mark.parametrize("master", ["local[2]", "spark://10.0.0.5:7077", None])
def test_a_number_is_the_limit_whatever_the_master_and_zero_is_none(master: str | None) -> None:
    assert once_slots(5, master) == 5
    assert once_slots(1, master) == 1
    assert once_slots(0, master) is None
