"""What a table on a named Kafka cluster compiles to and how a cluster that does not answer
is reported (no Spark: the publish and dead-letter targets, and the reachability check
against a port nothing listens on)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.runtime.projects import write_dws_project
from warehouse import Project
from warehouse.compile.inputs import kafka_input
from warehouse.compile.program import dead_letter_target, publish_target
from warehouse.runtime.bootstrap import check_reachable
from warehouse.runtime.errors import QueryFailedError

EU = """\
  clusters:
    eu: {bootstrap: "eu-1:9092", security: {protocol: SASL_PLAINTEXT, sasl_mechanism: PLAIN,
         username: wh, password: pw}}
"""


@pytest.fixture
def project(tmp_path: Path) -> Project:
    """`dim_users` reads `users` on `eu` with dead letters (following it to `eu`);
    `dws_city_1m` publishes to `eu`; `ods_orders` reads the default cluster and sends its
    dead letters to `eu`; `ods_clicks` reads `clicks` on `eu` with an option of its own."""
    root = write_dws_project(tmp_path / "proj", bootstrap="127.0.0.1:9", publish_topic="mv.c")
    conf = root / "conf" / "local.yml"
    conf.write_text(conf.read_text().replace("engines:", EU + "engines:", 1))
    users = root / "layers" / "dwd" / "users.yml"
    users.write_text(
        users.read_text().replace("schema: users}", "schema: users, cluster: eu}")
        + "quarantine: {kafka: {topic: dlq.users}}\n"
    )
    dws = root / "layers" / "dws" / "city_1m.yml"
    dws.write_text(dws.read_text().replace("topic: mv.c}", "topic: mv.c, cluster: eu}"))
    ods = root / "layers" / "ods" / "orders.yml"
    ods.write_text(ods.read_text() + "quarantine: {kafka: {topic: dlq.orders, cluster: eu}}\n")
    (root / "layers" / "ods" / "clicks.yml").write_text(
        "table: ods_clicks\n"
        "source: {kafka: {topic: clicks, cluster: eu, format: raw, options: {fetch.min.bytes: '1'}}}\n"
    )
    return Project.load(root)


SASL = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "PLAIN",
    "sasl.username": "wh",
    "sasl.password": "pw",
}


def test_publish_and_dead_letters_go_to_their_cluster_with_its_security(project: Project) -> None:
    published = publish_target(project, project.tables["dws_city_1m"], "home:9092")
    assert published is not None
    assert (published.bootstrap, published.client_config) == ("eu-1:9092", SASL)

    users = dead_letter_target(project, project.tables["dim_users"], "home:9092")
    assert users is not None
    assert (users.bootstrap, users.client_config) == ("eu-1:9092", SASL)
    assert (users.source_bootstrap, users.source_client_config) == ("eu-1:9092", SASL)

    # Its own cluster for the letters; the originals are read back where the table reads.
    orders = dead_letter_target(project, project.tables["ods_orders"], "home:9092")
    assert orders is not None
    assert (orders.bootstrap, orders.client_config) == ("eu-1:9092", SASL)
    plain = {"security.protocol": "PLAINTEXT"}
    assert (orders.source_bootstrap, orders.source_client_config) == ("home:9092", plain)


def test_a_table_reads_its_cluster_with_its_security_and_its_own_options(
    project: Project,
) -> None:
    clicks = project.tables["ods_clicks"]
    read = kafka_input(project, clicks, clicks.spec.source.kafka, "home:9092")  # type: ignore[union-attr]
    assert (read.bootstrap, read.client_config) == ("eu-1:9092", {**SASL, "fetch.min.bytes": "1"})
    assert read.fetch_options().bootstrap == "eu-1:9092"
    orders = project.tables["ods_orders"]
    home = kafka_input(project, orders, orders.spec.source.kafka, "home:9092")  # type: ignore[union-attr]
    assert (home.bootstrap, home.client_config) == ("home:9092", {"security.protocol": "PLAINTEXT"})


def test_a_named_cluster_that_does_not_answer_names_its_settings() -> None:
    with pytest.raises(QueryFailedError) as e:
        check_reachable("127.0.0.1:9", {}, table="dim_users", cluster="eu", timeout=1)
    message = str(e.value)
    assert "Table `dim_users` reads Kafka at `127.0.0.1:9`" in message
    assert "`kafka.clusters.eu.bootstrap`" in message
    assert "`WAREHOUSE__KAFKA__CLUSTERS__EU__BOOTSTRAP`" in message
    assert "`kafka.clusters.eu.security`" in message
