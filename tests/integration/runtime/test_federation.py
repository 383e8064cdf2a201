"""Federation (`source.kafka.clusters`): one table reads the same topic from two clusters
at once, on both engines.

Two bundled broker processes: `home` is the default cluster (PLAINTEXT), `eu` a named
one that takes SASL/PLAIN clients only. Each holds a topic `orders` of two partitions
with the same keys, the same ids and the same offsets (each cluster's records produced
partition by partition); only the city says which cluster a record is from. `ods_orders`
appends every record with its `_cluster` (every 25th has no id and is quarantined, its
cluster in the quarantined `row`), `ods_latest` upserts one row per `(_cluster, id)`.
Runs: once, again after more records on each cluster, again with nothing new (a restart
from the checkpoint), and, after the checkpoint was lost and `warehouse recover` rebuilt
it from the offsets the table's commits record per cluster, once more after more records: every
record is in the table exactly once, from its own cluster. Real brokers, real Spark,
real Delta.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from streams.kafka.admin import ensure_topic, produce
from tests.integration.projects import table_rows
from tests.integration.runtime.test_named_clusters import PASSWORD, SASL, USER, write_conf
from warehouse import Project
from warehouse.runtime.pipeline import Pipeline
from warehouse.runtime.recover import recover
from warehouse.runtime.status import status

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

CLUSTERS = ("default", "eu")


def _orders(cluster: str, first: int, count: int) -> list[tuple[str, str]]:
    """`count` orders from id `first` as `cluster` holds them: the same keys and ids on
    every cluster, the city naming the cluster; every 25th has no id."""
    out = []
    for i in range(first, first + count):
        order = {"city": f"{cluster}-{i % 7}"}
        if i % 25:
            order["id"] = i
        out.append((str(i), json.dumps(order)))
    return out


def _produce(servers: dict[str, str], first: int, count: int) -> None:
    """The orders `first`.. to both clusters, partition by partition (the first half to
    partition 0, the rest to 1): equal coordinates on both."""
    half = count // 2
    for cluster, bootstrap in servers.items():
        config = SASL if cluster == "eu" else None
        records = _orders(cluster, first, count)
        produce(bootstrap, "orders", records[:half], partition=0, client_config=config)
        produce(bootstrap, "orders", records[half:], partition=1, client_config=config)


def _project(root: Path, home: str, eu: str, engine: str) -> Project:
    security = (
        f"protocol: SASL_PLAINTEXT, sasl_mechanism: PLAIN, username: {USER}, "
        'password: "${EU_PASSWORD}"'
    )
    write_conf(root, home, f'bootstrap: "{eu}", security: {{{security}}}', engine)
    ods = root / "layers" / "ods"
    ods.mkdir(parents=True)
    source = (
        "source: {kafka: {topic: orders, clusters: [eu, default], format: json, schema: orders}}\n"
    )
    (ods / "orders.yml").write_text(
        "table: ods_orders\n" + source + "expectations:\n"
        "  - expect_column_values_to_not_be_null: {column: id}\n"
        "    on_violation: quarantine\n"
    )
    (ods / "latest.yml").write_text(
        "table: ods_latest\n"
        + source
        + "sink: {mode: upsert, keys: [_cluster, id], sequence_by: _timestamp}\n"
        "expectations:\n"
        "  - expect_column_values_to_not_be_null: {column: id}\n"
        "    on_violation: drop\n"
    )
    return Project.load(root, environ={"EU_PASSWORD": PASSWORD})


def _expected(last: int) -> list[tuple]:
    """Every order 1..`last` of each cluster with an id: (cluster, id, city)."""
    return sorted((c, i, f"{c}-{i % 7}") for c in CLUSTERS for i in range(1, last + 1) if i % 25)


def test_a_table_reads_one_topic_from_two_clusters_exactly_once(
    broker_factory, tmp_path: Path, spark, engine: str
) -> None:
    home, eu = broker_factory(), broker_factory(**{"sasl.users": f"{USER}:{PASSWORD}"})
    servers = {"default": home.bootstrap, "eu": eu.bootstrap}
    ensure_topic(home.bootstrap, "orders", partitions=2)
    ensure_topic(eu.bootstrap, "orders", partitions=2, client_config=SASL)
    project = _project(tmp_path / "proj", home.bootstrap, eu.bootstrap, engine)
    orders = Path(project.table_path("ods_orders"))
    latest = Path(project.table_path("ods_latest"))

    def run_once() -> None:
        results = Pipeline(project, spark, layer="ods").run(once=True)
        assert sorted(r.table for r in results) == ["ods_latest", "ods_orders"]

    def assert_exactly_once(last: int) -> None:
        rows = table_rows(orders, ["_cluster", "id", "city", "_partition", "_offset"])
        assert sorted(r[:3] for r in rows) == _expected(last)
        coordinates = [(r[0], r[3], r[4]) for r in rows]
        assert len(set(coordinates)) == len(coordinates), "a record is in the table twice"
        assert sorted(table_rows(latest, ["_cluster", "id", "city"])) == _expected(last)

    _produce(servers, 1, 100)
    run_once()
    assert_exactly_once(100)
    # Both clusters' partition 0 hold offsets 0..49: the same coordinates, two records.
    rows = table_rows(orders, ["_cluster", "_partition", "_offset"])
    assert ("default", 0, 0) in rows and ("eu", 0, 0) in rows

    _produce(servers, 101, 60)
    run_once()
    assert_exactly_once(160)
    run_once()  # nothing new: the checkpoint holds each cluster's position
    assert_exactly_once(160)

    # The quarantined records name their cluster.
    quarantined = table_rows(Path(project.quarantine_path("ods_orders")), ["row"])
    clusters = sorted(json.loads(r[0])["_cluster"] for r in quarantined)
    assert clusters == ["default"] * 6 + ["eu"] * 6

    # The commits record each cluster's offsets; status says each cluster's lag.
    [row] = status(project, tables=["ods_orders"])
    assert row["committed_offsets"] == {
        "clusters": {c: {"orders": {"0": 80, "1": 80}} for c in CLUSTERS}
    }
    assert row["lag"] == {
        "total": 0,
        "clusters": {c: {"total": 0, "topics": {"orders": 0}} for c in CLUSTERS},
    }

    # The checkpoint is lost: recover rebuilds it from the table's own log, per cluster;
    # the next run replays the newest batch (nothing of it written twice) and goes on.
    shutil.rmtree(project.checkpoint_path("ods_orders"))
    done = recover(project, "ods_orders")
    assert done["replays"] is True
    assert done["ending_offsets"] == row["committed_offsets"]
    _produce(servers, 161, 40)
    run_once()
    assert_exactly_once(200)
