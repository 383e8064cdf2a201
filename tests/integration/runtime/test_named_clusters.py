"""A table on a named Kafka cluster (`kafka.clusters`), on both engines.

Two bundled broker processes: `home` is the default cluster (`kafka.bootstrap`,
PLAINTEXT), `eu` a named one that takes SASL/PLAIN clients only (its password from
`${EU_PASSWORD}`), so a client given the default cluster's settings cannot read it. `ods_orders` reads the topic `orders` of `eu` (`home` holds a topic of the same
name with other records, which must not be read), publishes its rows to `mv.orders` on
`home` and sends the records its expectation quarantines to its dead-letter topic, which
follows the table to `eu`. Two `--once` runs: the table's rows, the published records and
the dead letters are exactly what was produced, each once. Real brokers, real Spark, real
Delta.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from streams.broker.launcher import broker_status
from streams.kafka.admin import ensure_topic, produce
from tests.integration.projects import new_topic, table_rows
from tests.integration.quality.dead_letters import assert_dead_letters
from tests.support.broker_clients import read_topic
from warehouse import Project
from warehouse.runtime.errors import QueryFailedError
from warehouse.runtime.pipeline import Pipeline
from warehouse.runtime.status import status

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

SCHEMA = {
    "type": "object",
    "properties": {"id": {"type": "integer"}, "city": {"type": "string"}},
}


def _orders(first: int, count: int) -> list[tuple[str, str]]:
    """`count` orders from id `first`; every 25th has no id (quarantined)."""
    out = []
    for i in range(first, first + count):
        order = {"city": f"c{i % 7}"} if i % 25 == 0 else {"id": i, "city": f"c{i % 7}"}
        out.append((str(i), json.dumps(order)))
    return out


USER, PASSWORD = "warehouse", "s3cret"
SASL = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "PLAIN",
    "sasl.username": USER,
    "sasl.password": PASSWORD,
}


def write_conf(root: Path, home: str, eu: str, engine: str) -> None:
    """conf/local.yml with `home` as the default cluster and `eu` (the fields of
    `kafka.clusters.eu`) as a named one, and schemas/orders.json."""
    (root / "conf").mkdir(parents=True)
    (root / "conf" / "local.yml").write_text(
        f"warehouse_root: {root / '.warehouse'}\n"
        "kafka:\n"
        f'  bootstrap: "{home}"\n'
        f"  clusters:\n    eu: {{{eu}}}\n"
        f"engines: {{kafka: {engine}, delta: {engine}}}\n"
        'spark:\n  master: "local[2]"\n  conf:\n    spark.sql.shuffle.partitions: "2"\n'
    )
    (root / "schemas").mkdir()
    (root / "schemas" / "orders.json").write_text(json.dumps(SCHEMA))


def _project(root: Path, home: str, eu: str, engine: str, *, sasl: bool = True) -> Project:
    security = (
        f", security: {{protocol: SASL_PLAINTEXT, sasl_mechanism: PLAIN, username: {USER}, "
        'password: "${EU_PASSWORD}"}'
        if sasl
        else ""
    )
    write_conf(root, home, f'bootstrap: "{eu}", client: {{client.id: wh-eu}}{security}', engine)
    (root / "layers" / "ods").mkdir(parents=True)
    (root / "layers" / "ods" / "orders.yml").write_text(
        "table: ods_orders\n"
        "source: {kafka: {topic: orders, cluster: eu, format: json, schema: orders}}\n"
        "sink: {mode: upsert, keys: [id], sequence_by: _offset}  # each id once\n"
        "expectations:\n"
        "  - expect_column_values_to_not_be_null: {column: id}\n"
        "    on_violation: quarantine\n"
        "publish: {kafka: {topic: mv.orders}}\n"
        "quarantine: {kafka: {topic: dlq.orders}}\n"
    )
    return Project.load(root, environ={"EU_PASSWORD": PASSWORD})


def _topics(bootstrap: str, config: dict[str, str] | None = None) -> set[str]:
    admin = AdminClient({**(config or {}), "bootstrap.servers": bootstrap})
    return set(admin.list_topics(timeout=30).topics)


def test_a_table_reads_a_named_cluster_and_publishes_to_the_default_one(
    broker_factory, tmp_path: Path, spark, engine: str
) -> None:
    home, eu = broker_factory(), broker_factory(**{"sasl.users": f"{USER}:{PASSWORD}"})
    new_topic(home.bootstrap, "orders", [("x", json.dumps({"id": -1, "city": "home"}))] * 50)
    ensure_topic(eu.bootstrap, "orders", partitions=2, client_config=SASL)
    produce(eu.bootstrap, "orders", _orders(1, 200), client_config=SASL)
    with pytest.raises(KafkaException):  # the default cluster's settings do not reach `eu`
        AdminClient({"bootstrap.servers": eu.bootstrap}).list_topics(timeout=5)
    project = _project(tmp_path / "proj", home.bootstrap, eu.bootstrap, engine)

    def run_once() -> None:
        results = Pipeline(project, spark, layer="ods").run(once=True)
        assert [r.table for r in results] == ["ods_orders"]

    run_once()
    produce(eu.bootstrap, "orders", _orders(201, 100), client_config=SASL)
    run_once()

    produced = [json.loads(v) for _, v in _orders(1, 300)]
    kept = sorted((o["id"], o["city"]) for o in produced if "id" in o)
    assert len(kept) == 288
    assert sorted(table_rows(Path(project.table_path("ods_orders")), ["id", "city"])) == kept

    published = read_topic(home.bootstrap, "mv.orders")
    assert (
        sorted((json.loads(r.key)["id"], json.loads(r.value)["city"]) for r in published) == kept
    ), "the published records are not the table's rows, once each"
    assert "mv.orders" not in _topics(eu.bootstrap, SASL)

    letters = assert_dead_letters(
        eu.bootstrap,
        "dlq.orders",
        "orders",
        project.quarantine_path("ods_orders"),
        "ods_orders",
        client_config=SASL,
    )
    assert letters == 12
    assert "dlq.orders" not in _topics(home.bootstrap)

    # `status` asks the table's cluster, with its security, for the lag and how far its
    # dead letters are sent.
    [row] = status(project, tables=["ods_orders"])
    assert row["lag"] == {"total": 0, "topics": {"orders": 0}}
    assert row["dead_letters"]["topic"] == "dlq.orders"
    assert row["dead_letters"]["versions_behind"] == 0
    assert row["dead_letters"]["sent_version"] == row["dead_letters"]["quarantine_version"]


def test_a_run_on_named_clusters_only_starts_no_embedded_broker_and_checks_their_topics(
    broker_factory, tmp_path: Path, spark
) -> None:
    eu = broker_factory()
    root = tmp_path / "proj"
    _project(root, "embedded", eu.bootstrap, "python", sasl=False)
    table = root / "layers" / "ods" / "orders.yml"
    # Everything on `eu`: the default cluster (the embedded broker) is not needed.
    table.write_text(
        table.read_text().replace("topic: mv.orders}", "topic: mv.orders, cluster: eu}")
    )
    conf = root / "conf" / "local.yml"
    conf.write_text(conf.read_text().replace("  clusters:", "  embedded: {port: 0}\n  clusters:"))
    project = Project.load(root)

    with pytest.raises(QueryFailedError) as missing:
        Pipeline(project, spark, layer="ods").bootstrap()
    assert f"topic `orders`, which does not exist on `{eu.bootstrap}`" in str(missing.value)
    assert broker_status(project.broker_dir()) is None

    new_topic(eu.bootstrap, "orders", _orders(1, 10))
    assert Pipeline(project, spark, layer="ods").bootstrap() is None
    assert broker_status(project.broker_dir()) is None
