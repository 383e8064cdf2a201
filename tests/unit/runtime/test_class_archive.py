"""The class archive's bookkeeping: which archive a launch gets, when the driver's Java
options keep their own, and which archives are pruned (no JVM started here; the
archive `make install` made is checked in a launched JVM in
tests/integration/runtime/test_session.py)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from warehouse.runtime.class_archive import (
    JAVA_FLAGS,
    Launch,
    archive_dir,
    archive_options,
    cached_archive,
    discard,
    launch_archive,
    prune,
)
from warehouse.runtime.session import _class_archive
from warehouse.runtime.spark_home import launch_java

OPTIONS = "spark.driver.extraJavaOptions"


def _launch(tmp_path: Path, name: str = "spark") -> Launch:
    home = tmp_path / name
    (home / "jars").mkdir(parents=True)
    (home / "jars" / "spark-core.jar").write_bytes(b"core")
    java = launch_java(os.environ)
    assert java is not None, "the tests need Java on PATH or in JAVA_HOME"
    return Launch(java=java, spark_home=home)


def _archive(cache: Path, launch: Launch, *, size: int = 64, recorded: int | None = None) -> Path:
    folder = archive_dir(cache)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{launch.key}.jsa"
    path.write_bytes(b"\0" * size)
    record = {
        "java": str(launch.java),
        "spark_home": str(launch.spark_home),
        "jars": str(launch.spark_home / "jars"),
        "size": size if recorded is None else recorded,
    }
    path.with_suffix(".json").write_text(json.dumps(record))
    return path


def test_a_launch_gets_its_archive_and_discarding_it_removes_its_record(tmp_path: Path) -> None:
    launch = _launch(tmp_path)
    path = _archive(tmp_path / "cache", launch)
    env = {"PATH": os.environ.get("PATH", ""), **_java_home()}
    archive = launch_archive(
        {OPTIONS: "-Dx=1"}, launch.spark_home, cache_dir=tmp_path / "cache", environ=env
    )
    assert archive is not None and archive.path == path
    assert archive_options(archive) == " ".join([f"-XX:SharedArchiveFile={path}", *JAVA_FLAGS])
    discard(archive)
    assert list(path.parent.iterdir()) == []


def test_java_options_of_your_own_choose_class_sharing(tmp_path: Path) -> None:
    """Options that name class-data sharing, in the driver's options or in the variables
    the `java` launcher reads, keep the JVM's choice; so does a cluster's master."""
    launch = _launch(tmp_path)
    _archive(tmp_path / "cache", launch)
    env = {"PATH": os.environ.get("PATH", ""), **_java_home()}
    for own in ("-Xshare:off", "-XX:SharedArchiveFile=/opt/my.jsa", "-XX:ArchiveClassesAtExit=a"):
        conf = {OPTIONS: own}
        assert (
            launch_archive(conf, launch.spark_home, cache_dir=tmp_path / "cache", environ=env)
            is None
        )
    for variable in ("JDK_JAVA_OPTIONS", "JAVA_TOOL_OPTIONS"):
        kept = launch_archive(
            {},
            launch.spark_home,
            cache_dir=tmp_path / "cache",
            environ={**env, variable: "-Xshare:auto"},
        )
        assert kept is None
    assert launch_archive({}, launch.spark_home, cache_dir=tmp_path / "cache", environ=env)
    assert _class_archive({}, "spark://head:7077", launch.spark_home) is None


def test_an_archive_is_used_whole_and_only_for_its_launch(tmp_path: Path) -> None:
    """A torn archive crashes the JVM that maps it: one whose size is not the size it was
    recorded with is left out. Another Spark's jars (one replaced, one added) give
    another key, so an archive is never passed to a launch it was not made for."""
    cache = tmp_path / "cache"
    launch = _launch(tmp_path)
    _archive(cache, launch, size=64, recorded=128)
    assert cached_archive(cache, launch) is None
    _archive(cache, launch, size=64)
    found = cached_archive(cache, launch)
    assert found is not None and found.size == 64

    before = launch.key
    jar = launch.spark_home / "jars" / "spark-core.jar"
    jar.write_bytes(b"core, built again")
    assert launch.key != before
    assert cached_archive(cache, launch) is None
    replaced = launch.key
    (launch.spark_home / "jars" / "delta.jar").write_bytes(b"delta")
    assert launch.key not in (before, replaced)
    assert _launch(tmp_path, "other").key != launch.key


def test_prune_removes_the_archives_of_gone_and_replaced_launches(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    kept = _launch(tmp_path, "spark")
    kept_path = _archive(cache, kept)
    alive = _archive(cache, _launch(tmp_path, "another-venv"))
    gone_launch = _launch(tmp_path, "deleted-venv")
    gone = _archive(cache, gone_launch)
    (gone_launch.spark_home / "jars" / "spark-core.jar").unlink()
    (gone_launch.spark_home / "jars").rmdir()
    # The same SPARK_HOME with the jars before an upgrade: another key, a replaced archive.
    old_jars = archive_dir(cache) / "0123456789abcdef.jsa"
    old_jars.write_bytes(b"\0" * 8)
    old_jars.with_suffix(".json").write_text(
        json.dumps({"spark_home": str(kept.spark_home), "jars": str(kept.spark_home / "jars")})
    )
    torn = archive_dir(cache) / f".{kept.key}-dead.jsa"
    torn.write_bytes(b"\0")
    hour_ago = time.time() - 3700
    os.utime(torn, (hour_ago, hour_ago))

    removed = prune(cache, keep=kept.key)

    assert sorted(removed) == sorted([gone, old_jars])
    assert kept_path.exists() and alive.exists() and alive.with_suffix(".json").exists()
    assert not gone.with_suffix(".json").exists() and not old_jars.with_suffix(".json").exists()
    assert not torn.exists()


def _java_home() -> dict[str, str]:
    return {"JAVA_HOME": os.environ["JAVA_HOME"]} if os.environ.get("JAVA_HOME") else {}


def test_a_launch_with_an_extra_class_path_has_an_archive_of_its_own(tmp_path: Path) -> None:
    """Java maps an archive only for the class path it was made with: a session whose
    driver has an extra class path (the framework's local file system) gets the archive
    made with that class path, and one without it the other."""
    plain = _launch(tmp_path)
    jar = tmp_path / "fs.jar"
    jar.write_bytes(b"jar")
    extra = Launch(java=plain.java, spark_home=plain.spark_home, class_path=str(jar))
    key = extra.key
    assert key != plain.key
    path = _archive(tmp_path / "cache", extra)
    env = {"PATH": os.environ.get("PATH", ""), **_java_home()}
    found = launch_archive(
        {"spark.driver.extraClassPath": str(jar)},
        plain.spark_home,
        cache_dir=tmp_path / "cache",
        environ=env,
    )
    assert found is not None and found.path == path
    assert launch_archive({}, plain.spark_home, cache_dir=tmp_path / "cache", environ=env) is None
    jar.write_bytes(b"another build")  # a jar built again is another class path
    assert extra.key != key
