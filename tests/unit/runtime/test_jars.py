"""The native jars' coordinates and the manifest that lets later starts skip Maven."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from warehouse.runtime.jars import (
    DELTA_CATALOG,
    DELTA_EXTENSION,
    MANIFEST_VERSION,
    NativePackages,
    artifact_name,
    cached_jars,
    installed_packages,
    manifest_path,
)


def test_coordinates_follow_the_installed_versions() -> None:
    p = NativePackages(spark_version="4.2.0", delta_version="4.4.0")
    assert p.coordinates == [
        "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0",
        "io.delta:delta-spark_4.2_2.13:4.4.0",
    ]
    assert NativePackages(spark_version="4.2.0", delta_version=None).coordinates == [
        "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"
    ]


@pytest.mark.parametrize(
    ("name", "grouped", "artifact"),
    [
        ("org.apache.spark_spark-sql-kafka-0-10_2.13-4.2.0.jar", True, "spark-sql-kafka-0-10_2.13"),
        (
            "org.scala-lang.modules_scala-parallel-collections_2.13-1.2.0.jar",
            True,
            "scala-parallel-collections_2.13",
        ),
        ("com.github.luben_zstd-jni-1.5.7-3.jar", True, "zstd-jni"),
        ("io.delta_delta-spark_4.2_2.13-4.4.0.jar", True, "delta-spark_4.2_2.13"),
        ("jackson-databind-2.21.2.jar", False, "jackson-databind"),
        ("zstd-jni-1.5.7-7.jar", False, "zstd-jni"),
    ],
)
def test_artifact_names_match_between_ivy_and_spark(
    name: str, grouped: bool, artifact: str
) -> None:
    assert artifact_name(name, grouped=grouped) == artifact


def _manifest(cache: Path, packages: NativePackages, files: list[Path]) -> None:
    cache.mkdir(parents=True, exist_ok=True)
    manifest_path(cache, packages).write_text(
        json.dumps(
            {
                "version": MANIFEST_VERSION,
                "files": [str(f) for f in files],
                "kafka": True,
                "delta": True,
            }
        )
    )


def test_a_complete_manifest_gives_the_session_conf(tmp_path: Path) -> None:
    packages = NativePackages(spark_version="4.2.0", delta_version="4.4.0")
    jars = [tmp_path / "a.jar", tmp_path / "b.jar"]
    for j in jars:
        j.write_bytes(b"PK")
    _manifest(tmp_path / "cache", packages, jars)
    got = cached_jars(tmp_path / "cache", packages)
    assert got is not None and got.kafka and got.delta
    assert got.spark_conf() == {
        "spark.jars": f"{jars[0]},{jars[1]}",
        "spark.sql.extensions": DELTA_EXTENSION,
        "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
    }


def test_no_manifest_or_a_missing_file_means_not_cached(tmp_path: Path) -> None:
    packages = NativePackages(spark_version="4.2.0", delta_version="4.4.0")
    assert cached_jars(tmp_path / "cache", packages) is None
    _manifest(tmp_path / "cache", packages, [tmp_path / "gone.jar"])
    assert cached_jars(tmp_path / "cache", packages) is None
    # Another pyspark version has its own manifest: this one does not count for it.
    other = NativePackages(spark_version="4.2.1", delta_version="4.4.0")
    assert manifest_path(tmp_path / "cache", other) != manifest_path(tmp_path / "cache", packages)


def test_cli_show_names_the_packages_and_says_what_is_cached(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from warehouse.cli.main import main

    assert main(["jars", "show", "--cache-dir", str(tmp_path / "empty")]) == 1
    out = capsys.readouterr().out
    packages = installed_packages()
    assert packages.kafka in out and "cached: no" in out
    jar = tmp_path / "k.jar"
    jar.write_bytes(b"PK")
    _manifest(tmp_path / "cache", packages, [jar])
    assert main(["jars", "show", "--cache-dir", str(tmp_path / "cache")]) == 0
    assert "cached: 1 jar(s)" in capsys.readouterr().out
