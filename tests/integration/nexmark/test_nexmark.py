"""The Nexmark project (benchmarks/nexmark/project) run once over a few thousand of the
generator's events, on both engines: every query's table equals DuckDB's batch answer
over the same events (benchmarks/nexmark/reference.py), exactly.

The events go once to the run's shared broker; each engine builds its own warehouse root
from the same topics.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.nexmark import reference
from benchmarks.nexmark.generator import generate, produce_events, write_ndjson
from streams.delta.arrow import read_table
from warehouse import Project

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(1200)]

PROJECT = Path(__file__).resolve().parents[3] / "benchmarks" / "nexmark" / "project"
EVENTS = 3000
RATE = 100
"""Events per second of event time: 3000 events span 30 s, three 10-second windows."""
SEED = 7


@pytest.fixture(scope="module")
def expected(broker, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[tuple]]:
    """The events produced once to the shared broker, and DuckDB's answer over them."""
    events = generate(EVENTS, seed=SEED, rate=RATE)
    produce_events(broker.bootstrap, events)
    folder = write_ndjson(events, tmp_path_factory.mktemp("nexmark-events"))
    return reference.compute(folder)


def test_queries_equal_the_batch_reference(
    spark, broker, expected: dict[str, list[tuple]], tmp_path: Path, engine: str
) -> None:
    project = Project.load(
        PROJECT,
        environ={},
        warehouse_root=str(tmp_path / "wh"),
        kafka={"bootstrap": broker.bootstrap},
        engines={"kafka": engine, "delta": engine},
    )
    project.pipeline(spark, "all", progress=lambda _: None).run(once=True)

    def got(name: str) -> list[dict]:
        return read_table(str(project.table_path(name))).to_pylist()

    # Every query has rows to compare: an empty answer on both sides would prove nothing.
    assert all(expected.values()), {k: len(v) for k, v in expected.items()}
    for name in reference.COLUMNS:
        assert reference.project_rows(name, got(name)) == expected[name], name
