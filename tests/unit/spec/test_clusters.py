"""Named Kafka clusters (`kafka.clusters`): their settings, the tables naming them, and the
load-time checks that compare topics as (cluster, topic) pairs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.runtime.projects import write_project
from tests.unit.spec.conftest import assert_problems, load_problems
from warehouse import Project
from warehouse.compile.plan import build_plan, render

# Each expected problem as (file, field, words the message must contain); the count is exact.
TOPIC_PROBLEMS = [
    (
        "layers/ods/eu_payments.yml",
        "quarantine.kafka.topic",
        ("`payments` on cluster `eu`", "reads", "`dlq.ods_eu_payments`"),
    ),
    (
        "layers/ods/pub_eu.yml",
        "publish.kafka.topic",
        ("`mv.views` on cluster `eu`", "`ods_pub_eu_again`"),
    ),
    (
        "layers/ods/pub_eu_again.yml",
        "publish.kafka.topic",
        ("`mv.views` on cluster `eu`", "`ods_pub_eu`"),
    ),
    (
        "layers/ods/us_dlq.yml",
        "quarantine.kafka.topic",
        ("`mv.views` on cluster `eu`", "publishes a table to"),
    ),
]
CASES = {
    "local": [
        (
            "layers/ods/unknown.yml",
            "source.kafka.cluster",
            (
                "`eux`",
                "conf/local.yml does not declare",
                "`default`, `eu`, `us`",
                "`kafka.clusters`",
                "`eu`?",
            ),
        ),
        ("layers/ods/unknown.yml", "publish.kafka.cluster", ("`asia`", "`default`, `eu`, `us`")),
        ("layers/ods/unknown.yml", "quarantine.kafka.cluster", ("`mars`", "`default`, `eu`, `us`")),
        *TOPIC_PROBLEMS,
    ],
    # The config does not load: the tables' clusters are not checked against it.
    "bad": [
        ("conf/bad.yml", "kafka.clusters.local.bootstrap", ("`embedded`", "only be the default")),
        ("conf/bad.yml", "kafka.clusters.nowhere.bootstrap", ("required field `bootstrap`",)),
        *TOPIC_PROBLEMS,
    ],
    "bad_names": [
        (
            "conf/bad_names.yml",
            "kafka.clusters",
            ("`default` names the cluster of `kafka.bootstrap`", "`EU` is not a cluster name"),
        ),
        *TOPIC_PROBLEMS,
    ],
}


@pytest.mark.parametrize("env", list(CASES))
def test_cluster_problems_name_file_field_and_the_known_clusters(env: str) -> None:
    error = load_problems("clusters", env)
    assert_problems(error, CASES[env])


def _write(root: Path, extra_conf: str) -> Path:
    write_project(root, bootstrap="127.0.0.1:9092", dwd=False, extra_conf=extra_conf)
    return root


CLUSTERS = """\
  clusters:
    eu:
      bootstrap: "eu-1:9092,eu-2:9092"
      security: {protocol: SASL_SSL, sasl_mechanism: PLAIN, username: wh, password: "${EU_PW}"}
      client: {linger.ms: 5}
"""


def _with_clusters(root: Path) -> Path:
    """The project with `eu` declared under its `kafka:` section."""
    _write(root, "")
    conf = root / "conf" / "local.yml"
    conf.write_text(conf.read_text().replace("engines:", CLUSTERS + "engines:", 1))
    return root


def test_a_named_cluster_has_its_own_bootstrap_security_and_client(tmp_path: Path) -> None:
    kafka = Project.load(_with_clusters(tmp_path), environ={"EU_PW": "s3cret"}).config.kafka
    assert kafka.cluster_names == ["default", "eu"]
    assert kafka.client_config() == {"security.protocol": "PLAINTEXT"}
    assert kafka.client_config({"acks": "all"}, cluster="eu") == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "wh",
        "sasl.password": "s3cret",
        "linger.ms": "5",
        "acks": "all",
    }
    assert kafka.bootstrap_of("eu", "resolved:1") == "eu-1:9092,eu-2:9092"
    assert kafka.bootstrap_of("default", "resolved:1") == "resolved:1"
    assert "s3cret" not in str(kafka) and "s3cret" not in repr(kafka)


def test_a_named_cluster_is_set_from_the_environment_too(tmp_path: Path) -> None:
    env = {"EU_PW": "pw", "WAREHOUSE__KAFKA__CLUSTERS__EU__BOOTSTRAP": "env-eu:9092"}
    kafka = Project.load(_with_clusters(tmp_path), environ=env).config.kafka
    assert kafka.clusters["eu"].bootstrap == "env-eu:9092"


def test_a_table_names_its_cluster_and_its_dead_letters_and_publish_follow(
    tmp_path: Path,
) -> None:
    root = _with_clusters(tmp_path)
    ods = root / "layers" / "ods"
    (ods / "orders.yml").write_text(
        (ods / "orders.yml").read_text().replace("schema: orders}", "schema: orders, cluster: eu}")
        + "quarantine: {kafka: {topic: dlq.orders}}\n"
    )
    (ods / "views.yml").write_text(
        "table: ods_views\n"
        "source: {kafka: {topic: views, format: raw, cluster: default}}\n"
        "sink: {mode: upsert, keys: [key], sequence_by: _offset}\n"
        "publish: {kafka: {topic: mv.views, cluster: eu}}\n"
        "quarantine: {kafka: {topic: dlq.views, cluster: eu}}\n"
    )
    project = Project.load(root, environ={"EU_PW": "pw"})
    orders, views = project.tables["ods_orders"], project.tables["ods_views"]
    assert (orders.source_cluster, orders.dead_letter_cluster) == ("eu", "eu")
    assert orders.kafka_clusters == ["eu"]
    assert (views.source_cluster, views.dead_letter_cluster) == ("default", "eu")
    assert views.kafka_clusters == ["default", "eu"]

    plans = {p.name: p for p in build_plan(project)}
    assert (plans["ods_orders"].cluster, plans["ods_orders"].publish_cluster) == ("eu", None)
    assert (plans["ods_views"].cluster, plans["ods_views"].publish_cluster) == (None, "eu")
    text = render(list(plans.values()), "text")
    assert "kafka `orders` on cluster `eu` as json (orders) from earliest" in text
    assert "kafka `views` as raw from earliest" in text
    assert "publish:     kafka topic `mv.views` on cluster `eu` (compacted)" in text
    data = {t["name"]: t for t in json.loads(render(list(plans.values()), "json"))["tables"]}
    assert data["ods_orders"]["cluster"] == "eu" and data["ods_views"]["cluster"] is None
    assert data["ods_views"]["publish_cluster"] == "eu"
    dot = render(list(plans.values()), "dot")
    assert '"kafka:eu/orders" -> "ods_orders";' in dot
    assert '"ods_views" -> "kafka:eu/mv.views";' in dot
