"""Federation (`source.kafka.clusters`): one table reading the same topics from several
clusters. The load-time rules, and what the plan and the fingerprint make of it."""

from __future__ import annotations

from pathlib import Path

from tests.unit.runtime.projects import write_project
from tests.unit.spec.conftest import assert_problems, load_problems
from warehouse import Project
from warehouse.compile.federation import as_sources, by_cluster, of_cluster
from warehouse.compile.fingerprint import fingerprint
from warehouse.compile.plan import build_plan, render
from warehouse.spec.table import KafkaSource

PROBLEMS = [
    ("layers/ods/both.yml", "source.kafka", ("`cluster`", "`clusters`", "not both")),
    ("layers/ods/twice.yml", "source.kafka.clusters", ("`eu` more than once",)),
    ("layers/ods/alone.yml", "source.kafka.clusters", ("at least two", "`cluster: NAME`")),
    (
        "layers/ods/unknown.yml",
        "source.kafka.clusters",
        ("`uss`", "conf/local.yml does not declare", "`default`, `eu`, `us`", "`us`?"),
    ),
    (
        "layers/ods/by_offset.yml",
        "sink.sequence_by",
        ("`default`, `us`", "`_offset`", "latest", "Sequence by a column"),
    ),
    (
        "layers/ods/dead_letters.yml",
        "quarantine.kafka",
        ("`eu`, `us`", "dead-letter topic", "`_cluster`", "remove `quarantine`"),
    ),
]


def test_federation_problems_name_file_and_field() -> None:
    assert_problems(load_problems("federation"), PROBLEMS)


def test_clusters_are_read_in_the_order_of_their_names() -> None:
    k = KafkaSource.model_validate({"topic": "t", "format": "raw", "clusters": ["us", "eu"]})
    assert (k.federated, k.cluster_list) == (True, ["eu", "us"])
    one = KafkaSource.model_validate({"topic": "t", "format": "raw", "cluster": "us"})
    assert (one.federated, one.cluster_list) == (False, ["us"])


CLUSTERS = """\
  clusters:
    eu: {bootstrap: "eu-1:9092"}
"""


def _project(root: Path, source_extra: str) -> Project:
    write_project(root, bootstrap="127.0.0.1:9092", dwd=False, extra_conf="")
    conf = root / "conf" / "local.yml"
    conf.write_text(conf.read_text().replace("engines:", CLUSTERS + "engines:", 1))
    orders = root / "layers" / "ods" / "orders.yml"
    orders.write_text(
        orders.read_text().replace("schema: orders}", f"schema: orders{source_extra}}}")
    )
    return Project.load(root)


def test_a_federated_table_plans_each_cluster_and_has_a_cluster_column(tmp_path: Path) -> None:
    project = _project(tmp_path, ", clusters: [eu, default]")
    defn = project.tables["ods_orders"]
    assert defn.source_clusters == ["default", "eu"]
    assert defn.kafka_clusters == ["default", "eu"]
    plan = {p.name: p for p in build_plan(project)}["ods_orders"]
    assert plan.clusters == ["default", "eu"]
    text = render([plan], "text")
    assert "kafka `orders` on clusters `default`, `eu` (federated) as json (orders)" in text
    dot = render([plan], "dot")
    assert '"kafka:orders" -> "ods_orders";' in dot
    assert '"kafka:eu/orders" -> "ods_orders";' in dot
    assert "_cluster" in [c.name for c in project.schemas["ods_orders"]]


def test_one_cluster_keeps_its_fingerprint_and_a_federation_changes_it(tmp_path: Path) -> None:
    plain = _project(tmp_path / "a", "")
    default = _project(tmp_path / "b", ", cluster: default")
    federated = _project(tmp_path / "c", ", clusters: [default, eu]")
    reordered = _project(tmp_path / "d", ", clusters: [eu, default]")
    prints = [fingerprint(p, "ods_orders") for p in (plain, default, federated, reordered)]
    assert prints[0] == prints[1]
    assert prints[2] != prints[0]
    assert "_cluster" not in prints[0]["parts"]["columns"]
    assert prints[2]["parts"]["columns"]["_cluster"] == "string"
    assert prints[2] == prints[3]


def test_offsets_are_recorded_by_cluster_and_read_back_in_source_order() -> None:
    """What a federated table's commits record, and the offset log's sources again."""
    sources = {"sources": [{"t": {"0": 5}}, {"t": {"0": 2}}]}
    named = by_cluster(sources, ["default", "eu"])
    assert named == {"clusters": {"default": {"t": {"0": 5}}, "eu": {"t": {"0": 2}}}}
    assert as_sources(named, ["default", "eu"]) == sources
    assert as_sources(named, ["default", "us"]) is None  # written with other clusters
    assert of_cluster(named, "eu") == {"t": {"0": 2}}
    assert of_cluster(named, "us") is None
    assert by_cluster(None, ["default", "eu"]) is None
