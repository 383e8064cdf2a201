"""`warehouse bundle`: the archive unpacks anywhere and its Python imports the project
from inside the archive (not from this checkout); arguments that cannot work fail
with exit 2 before anything is built."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.integration.cluster.standalone import SPARK_HOME
from warehouse.bundle import BundleArgumentError, build_bundle, editable_distributions
from warehouse.cli.main import main

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_archive_unpacked_elsewhere_imports_the_project_from_itself(
    env_bundle, tmp_path: Path
) -> None:
    assert env_bundle.editable == ["spark_warehouse"]
    assert not env_bundle.includes_pyspark
    with tarfile.open(env_bundle.path) as tar:
        names = tar.getnames()
        tar.extractall(tmp_path / "unpacked", filter="tar")
    assert not [n for n in names if "__editable__" in n]
    assert "bin/python" in names
    # pyspark is left out of the archive: Spark puts its own `python/lib/pyspark.zip`
    # and py4j on the Python workers' path, as done here.
    spark_zips = sorted((SPARK_HOME / "python" / "lib").glob("*.zip"))
    assert [z.name.split("-")[0] for z in spark_zips] == ["py4j", "pyspark.zip"]
    probe = (
        "import json, sys\n"
        "import warehouse, streams, streams.kafka.source, streams.delta, deltalake, confluent_kafka\n"
        "import pyspark\n"
        "print(json.dumps({'prefix': sys.prefix, 'warehouse': warehouse.__file__,"
        " 'streams': streams.__file__, 'pyspark': pyspark.__file__}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONHOME")}
    env["PYTHONPATH"] = os.pathsep.join(map(str, spark_zips))
    # An executor's worker that may not write byte code reads what the archive carries:
    # `-v` names each module's code object, a .pyc when it came from byte code.
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    done = subprocess.run(
        [str(tmp_path / "unpacked" / "bin" / "python"), "-v", "-c", probe],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    inside = str(tmp_path / "unpacked")
    assert seen["prefix"] == inside
    assert seen["warehouse"].startswith(inside + "/lib/") and seen["streams"].startswith(
        inside + "/lib/"
    )
    assert seen["pyspark"] == str(
        SPARK_HOME / "python" / "lib" / "pyspark.zip" / "pyspark" / "__init__.py"
    )
    loaded = [
        line.removeprefix("# code object from ").strip("'")
        for line in done.stderr.splitlines()
        if line.startswith("# code object from ") and inside in line
    ]
    compiled_here = [path for path in loaded if not path.endswith(".pyc")]
    for package in ("warehouse", "streams", "deltalake", "confluent_kafka"):
        assert f"/site-packages/{package}/__pycache__/__init__.cpython-" in "\n".join(loaded)
    assert not compiled_here, (
        f"{len(compiled_here)} modules compiled from source: {compiled_here[:5]}"
    )


def test_editable_distributions_reads_pep610_direct_urls(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    for name, direct in (
        ("mine-1.0", {"url": "file:///src/my%20proj", "dir_info": {"editable": True}}),
        ("plain-2.0", {"url": "file:///src/plain", "dir_info": {}}),
        ("remote-3.0", {"url": "https://example.org/x.whl", "archive_info": {}}),
    ):
        (site / f"{name}.dist-info").mkdir(parents=True)
        (site / f"{name}.dist-info" / "direct_url.json").write_text(json.dumps(direct))
    (site / "nourl-1.0.dist-info").mkdir()
    assert editable_distributions(site) == {"mine": Path("/src/my proj")}


def test_bad_arguments_fail_before_building(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(BundleArgumentError, match="not a virtual environment"):
        build_bundle(tmp_path / "env.tar.gz", venv=tmp_path)
    (tmp_path / "env.tar.gz").write_text("old")
    with pytest.raises(BundleArgumentError, match="already exists. Remove it or pass `--force`"):
        build_bundle(tmp_path / "env.tar.gz")
    with pytest.raises(BundleArgumentError, match=r"Wheel `.*nope.whl` is not a .whl file"):
        build_bundle(tmp_path / "other.tar.gz", wheels=[tmp_path / "nope.whl"])
    assert main(["bundle", "--output", str(tmp_path / "env.txt"), "--venv", sys.prefix]) == 2
    assert "has no known suffix" in capsys.readouterr().err
    assert not list(tmp_path.glob(".warehouse-bundle-*"))
