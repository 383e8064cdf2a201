"""Settings: precedence (kwargs > WAREHOUSE__ environment > conf file), secrets redacted."""

from __future__ import annotations

from pathlib import Path

import pytest

from warehouse import Project, ProjectError


def project(tmp_path: Path, conf: str | None) -> Path:
    (tmp_path / "layers" / "ods").mkdir(parents=True)
    (tmp_path / "layers" / "ods" / "events.yml").write_text(
        "table: ods_events\nsource: {kafka: {topic: events, format: raw}}\n"
    )
    if conf is not None:
        (tmp_path / "conf").mkdir()
        (tmp_path / "conf" / "local.yml").write_text(conf)
    return tmp_path


CONF = """
warehouse_root: from-file
kafka:
  bootstrap: file:9092
  security: {protocol: SASL_SSL, sasl_mechanism: PLAIN, username: app, password: "${PW}"}
spark: {conf: {spark.sql.shuffle.partitions: "3"}}
"""


def test_keyword_overrides_beat_environment_beat_file(tmp_path: Path) -> None:
    path = project(tmp_path, CONF)
    env = {"PW": "pw", "WAREHOUSE__KAFKA__BOOTSTRAP": "env:9092"}
    assert Project.load(path, environ={"PW": "pw"}).config.kafka.bootstrap == "file:9092"
    assert Project.load(path, environ=env).config.kafka.bootstrap == "env:9092"
    kw = Project.load(path, environ=env, kafka__bootstrap="kw:9092")
    assert kw.config.kafka.bootstrap == "kw:9092"
    nested = Project.load(path, environ=env, kafka={"bootstrap": "kw2:9092"})
    assert nested.config.kafka.bootstrap == "kw2:9092"
    assert nested.config.kafka.security.username == "app"  # merged, not replaced


def test_environment_keeps_the_case_of_spark_property_names(tmp_path: Path) -> None:
    env = {"PW": "pw", "WAREHOUSE__SPARK__CONF__spark.sql.shuffle.partitions": "8"}
    config = Project.load(project(tmp_path, CONF), environ=env).config
    assert config.spark.conf == {"spark.sql.shuffle.partitions": "8"}


def test_root_is_resolved_against_the_project_folder(tmp_path: Path) -> None:
    loaded = Project.load(project(tmp_path, CONF), environ={"PW": "pw"})
    assert loaded.root == str(tmp_path.resolve() / "from-file")


def test_no_conf_file_for_local_means_defaults(tmp_path: Path) -> None:
    loaded = Project.load(project(tmp_path, None), environ={})
    assert loaded.config.kafka.bootstrap == "embedded"
    assert loaded.root == str(tmp_path.resolve() / ".warehouse")


def test_secrets_never_print(tmp_path: Path) -> None:
    config = Project.load(project(tmp_path, CONF), environ={"PW": "hunter2-secret"}).config
    for shown in (str(config), repr(config), config.model_dump_json(), str(config.model_dump())):
        assert "hunter2-secret" not in shown
    assert "**********" in str(config)
    assert config.kafka.security.client_config()["sasl.password"] == "hunter2-secret"


def test_bad_environment_and_keyword_overrides_name_their_origin(tmp_path: Path) -> None:
    path = project(tmp_path, CONF)
    with pytest.raises(ProjectError) as info:
        Project.load(
            path,
            environ={"PW": "pw", "WAREHOUSE__KAFKA__BOOTSTRAPP": "x:1"},
            engines={"delta": "fast"},
        )
    got = {(p.path, p.field): p.message for p in info.value.problems}
    assert set(got) == {("<environment>", "kafka.bootstrapp"), ("<overrides>", "engines.delta")}
    assert "`WAREHOUSE__KAFKA__BOOTSTRAPP`" in got[("<environment>", "kafka.bootstrapp")]
    assert "`fast`" in got[("<overrides>", "engines.delta")]


def test_property_maps_take_numbers_and_booleans_as_kafka_writes_them(tmp_path: Path) -> None:
    conf = (
        "kafka:\n"
        "  client: {enable.idempotence: true, linger.ms: 5}\n"
        "  embedded:\n"
        "    config: {num.partitions: 3, auto.create.topics.enable: false,"
        " log.cleaner.min.cleanable.ratio: 0.5, log.dirs: /data}\n"
        "spark: {conf: {spark.sql.shuffle.partitions: 2, spark.ui.enabled: False}}\n"
    )
    config = Project.load(project(tmp_path, conf), environ={}).config
    assert config.kafka.embedded.config == {
        "num.partitions": "3",
        "auto.create.topics.enable": "false",
        "log.cleaner.min.cleanable.ratio": "0.5",
        "log.dirs": "/data",
    }
    assert config.kafka.client == {"enable.idempotence": "true", "linger.ms": "5"}
    assert config.spark.conf == {
        "spark.sql.shuffle.partitions": "2",
        "spark.ui.enabled": "false",
    }


def test_a_property_that_is_not_a_scalar_names_its_field(tmp_path: Path) -> None:
    conf = "kafka:\n  embedded:\n    config: {num.partitions: [3]}\n"
    with pytest.raises(ProjectError) as info:
        Project.load(project(tmp_path, conf), environ={})
    message = str(info.value)
    assert "conf/local.yml" in message
    assert "kafka.embedded.config.num.partitions" in message
    assert "expected text, got `list`" in message


def test_quality_events_retention_is_an_interval_of_30_days_by_default(tmp_path: Path) -> None:
    default = Project.load(project(tmp_path / "a", None), environ={}).config.quality
    assert (default.events_retention, default.events_retention_seconds) == ("30 days", 2592000)
    week = Project.load(
        project(tmp_path / "b", "quality: {events_retention: 1 week}\n"), environ={}
    ).config.quality
    assert week.events_retention_seconds == 604800
    with pytest.raises(ProjectError, match="events_retention"):
        Project.load(project(tmp_path / "c", "quality: {events_retention: 0 days}\n"), environ={})


@pytest.mark.parametrize(
    ("catalog", "field", "value"),
    [
        ("{schema: dwd-orders}", "catalog.schema", "dwd-orders"),
        ('{schema: "{tier}"}', "catalog.schema", "{tier}"),
        ("{catalog: 1st, schema: wh}", "catalog.catalog", "1st"),
        ("{catalog: main}", "catalog.schema", None),
        ("{schema: wh, location: x}", "catalog.location", None),
    ],
)
def test_a_bad_catalog_setting_names_its_file_and_field(
    tmp_path: Path, catalog: str, field: str, value: str | None
) -> None:
    with pytest.raises(ProjectError) as info:
        Project.load(project(tmp_path, f"catalog: {catalog}\n"), environ={})
    [problem] = info.value.problems
    assert (problem.path, problem.field) == ("conf/local.yml", field)
    if value is not None:
        assert f"`{value}`" in problem.message


def test_the_catalog_names_every_table_by_layer(tmp_path: Path) -> None:
    loaded = Project.load(project(tmp_path, 'catalog: {schema: "wh_{layer}"}\n'), environ={})
    assert loaded.config.catalog is not None
    assert loaded.catalog_name("ods_events") == "spark_catalog.wh_ods.ods_events"
    assert Project.load(project(tmp_path / "b", ""), environ={}).catalog_name("ods_events") is None
