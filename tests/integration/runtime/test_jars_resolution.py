"""`warehouse jars fetch` resolves through Spark's own Ivy, in a child JVM, with the
framework's Ivy settings: Maven Central first, the local Maven repository after it.

Central here is a Maven repository on the local disk (a `file:` URL), so the test needs no
network; the resolution is Spark's real one. A `~/.m2` that holds an artifact's POM but
not its jar (as Maven leaves it after resolving another project's dependency tree) made
Spark's default settings fail the whole resolution with "download failed"."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from warehouse.runtime.errors import JarsError
from warehouse.runtime.jars import _resolve_in_child

pytestmark = [pytest.mark.spark]

POM = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>org.example</groupId>
  <artifactId>{artifact}</artifactId>
  <version>1.0</version>
</project>
"""


def _publish(repo: Path, artifact: str, *, jar: bool) -> None:
    folder = repo / "org" / "example" / artifact / "1.0"
    folder.mkdir(parents=True)
    (folder / f"{artifact}-1.0.pom").write_text(POM.format(artifact=artifact))
    if jar:
        with zipfile.ZipFile(folder / f"{artifact}-1.0.jar", "w") as z:
            z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
            z.writestr("org/example/probe.txt", artifact)


def test_a_pom_without_its_jar_in_the_local_repository_does_not_fail_resolution(
    tmp_path: Path,
) -> None:
    central, local_m2 = tmp_path / "central", tmp_path / "m2"
    _publish(central, "probe", jar=True)
    _publish(local_m2, "probe", jar=False)

    files = _resolve_in_child(
        ["org.example:probe:1.0"], tmp_path / "ivy", central=central.as_uri(), local_m2=local_m2
    )

    assert [f.name for f in files] == ["org.example_probe-1.0.jar"]
    with zipfile.ZipFile(files[0]) as z:
        assert z.read("org/example/probe.txt") == b"probe"


def test_an_artifact_nowhere_fails_with_what_ivy_said(tmp_path: Path) -> None:
    central, local_m2 = tmp_path / "central", tmp_path / "m2"
    central.mkdir()
    local_m2.mkdir()

    with pytest.raises(JarsError) as caught:
        _resolve_in_child(
            ["org.example:absent:1.0"],
            tmp_path / "ivy",
            central=central.as_uri(),
            local_m2=local_m2,
        )

    message = str(caught.value)
    assert "org.example:absent:1.0" in message
    assert "org.example#absent;1.0: not found" in message
    assert central.as_uri() in message
    assert "Traceback" not in message and "JAVA_GATEWAY_EXITED" not in message
