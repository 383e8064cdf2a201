"""The SPARK_HOME of locally launched sessions: links to the installed pyspark minus its
source-only zip, hard links shared by the virtualenvs that hold the same files, symbolic
links where hard links are refused (no Spark started here; the worker side is in
tests/integration/runtime/test_session.py)."""

from __future__ import annotations

import errno
import os
import shutil
import sys
import threading
from pathlib import Path

from warehouse.runtime.spark_home import installed_home, launch_home, launching, shadow_home


def _fake_home(root: Path) -> Path:
    home = root / "pyspark"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "spark-submit").write_text("#!/bin/sh\n")
    (home / "jars").mkdir()
    (home / "jars" / "spark-core.jar").write_bytes(b"jar")
    (home / "python" / "lib").mkdir(parents=True)
    (home / "python" / "lib" / "pyspark.zip").write_bytes(b"zip")
    (home / "python" / "lib" / "py4j-src.zip").write_bytes(b"zip")
    (home / "python" / "pyspark").mkdir()
    (home / "__init__.py").write_text("")
    (home / "__pycache__").mkdir()
    (home / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"pyc")
    return home


def _linked_copy(home: Path, dest: Path) -> Path:
    """`home` hard-linked file by file at `dest`: as uv installs one wheel into two
    virtualenvs."""
    shutil.copytree(home, dest, copy_function=os.link)
    return dest


def test_shadow_links_everything_but_the_source_zip(tmp_path: Path) -> None:
    home = _fake_home(tmp_path)
    shadow = shadow_home(home, tmp_path / "cache")
    assert shadow is not None
    assert (shadow / "bin" / "spark-submit").read_text() == "#!/bin/sh\n"
    assert (shadow / "jars" / "spark-core.jar").read_bytes() == b"jar"
    for rel in (
        "bin/spark-submit",
        "jars/spark-core.jar",
        "python/lib/py4j-src.zip",
        "__init__.py",
    ):
        assert not (shadow / rel).is_symlink()
        assert (shadow / rel).samefile(home / rel)
    assert (shadow / "python" / "pyspark").is_dir()
    assert not (shadow / "python" / "lib" / "pyspark.zip").exists()
    assert not (shadow / "__pycache__").exists()
    # Made once: the second call finds it and leaves no temporary copies behind.
    assert shadow_home(home, tmp_path / "cache") == shadow
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [shadow.name]


def test_virtualenvs_holding_the_same_files_share_one_directory(tmp_path: Path) -> None:
    """Named by the files, not by where they are installed: a second virtualenv with the
    same files (one wheel uv linked into both) launches from the first one's directory,
    which stays whole when the first is removed; a copy of the files gets its own."""
    cache = tmp_path / "cache"
    first = _fake_home(tmp_path / "one")
    second = _linked_copy(first, tmp_path / "two" / "pyspark")
    shared = shadow_home(first, cache)
    assert shared is not None and shadow_home(second, cache) == shared
    shutil.rmtree(tmp_path / "one")
    assert shadow_home(second, cache) == shared
    assert (shared / "jars" / "spark-core.jar").read_bytes() == b"jar"
    copied = tmp_path / "three" / "pyspark"
    shutil.copytree(second, copied)
    own = shadow_home(copied, cache)
    assert own is not None and own != shared
    assert sorted(p.name for p in cache.iterdir()) == sorted([shared.name, own.name])


def test_symbolic_links_where_hard_links_are_refused(tmp_path: Path, monkeypatch) -> None:
    """A cache on another file system than the virtualenv: the directory links by path."""

    def refused(src, dst, **kwargs):
        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), src)

    home = _fake_home(tmp_path)
    monkeypatch.setattr(os, "link", refused)
    shadow = shadow_home(home, tmp_path / "cache")
    assert shadow is not None
    assert (shadow / "jars").is_symlink() and (shadow / "jars").resolve() == home / "jars"
    assert (shadow / "python" / "lib" / "py4j-src.zip").is_symlink()
    assert not (shadow / "python" / "lib" / "pyspark.zip").exists()
    assert shadow_home(home, tmp_path / "cache") == shadow
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [shadow.name]


def test_a_pyspark_with_other_files_gets_its_own_directory(tmp_path: Path) -> None:
    home = _fake_home(tmp_path)
    first = shadow_home(home, tmp_path / "cache")
    (home / "python" / "lib" / "py4j-src.zip").rename(home / "python" / "lib" / "py4j-2.zip")
    second = shadow_home(home, tmp_path / "cache")
    assert second is not None and second != first
    assert (second / "python" / "lib" / "py4j-2.zip").samefile(
        home / "python" / "lib" / "py4j-2.zip"
    )
    # The first is left as it was: a running JVM may load classes through it.
    assert first is not None and (first / "python" / "lib" / "py4j-src.zip").is_file()
    (home / "jars" / "spark-core.jar").unlink()
    (home / "jars" / "spark-core.jar").write_bytes(b"jar")  # reinstalled: a new file
    third = shadow_home(home, tmp_path / "cache")
    assert third is not None and third not in (first, second)


def test_the_directories_of_removed_pysparks_are_pruned(tmp_path: Path) -> None:
    """Making a directory removes those whose pyspark is gone (a deleted virtualenv's)
    and keeps those whose pyspark is still installed."""
    gone = shadow_home(_fake_home(tmp_path / "gone"), tmp_path / "cache")
    kept = shadow_home(_fake_home(tmp_path / "kept"), tmp_path / "cache")
    assert gone is not None and kept is not None
    shutil.rmtree(tmp_path / "gone")
    made = shadow_home(_fake_home(tmp_path / "new"), tmp_path / "cache")
    assert made is not None
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == sorted([kept.name, made.name])


def test_an_incomplete_directory_is_not_used(tmp_path: Path) -> None:
    home = _fake_home(tmp_path)
    (home / "jars" / "spark-sql.jar").write_bytes(b"jar")
    shadow = shadow_home(home, tmp_path / "cache")
    assert shadow is not None
    (shadow / "jars" / "spark-core.jar").unlink()
    assert shadow_home(home, tmp_path / "cache") is None


def test_processes_making_it_at_once_agree(tmp_path: Path) -> None:
    home = _fake_home(tmp_path)
    got: list[Path | None] = []
    threads = [
        threading.Thread(target=lambda: got.append(shadow_home(home, tmp_path / "cache")))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got)) == 1 and got[0] is not None
    assert len(list((tmp_path / "cache").iterdir())) == 1


def test_spark_default_is_kept_when_something_else_decides(tmp_path: Path) -> None:
    env = {"PYSPARK_PYTHON": sys.executable}
    cache = tmp_path / "cache"
    assert (
        launch_home("local[2]", environ={**env, "SPARK_HOME": "/opt/spark"}, cache_dir=cache)
        is None
    )
    assert launch_home("spark://host:7077", environ=env, cache_dir=cache) is None
    assert launch_home("local[2]", environ={}, cache_dir=cache) is None
    other = tmp_path / "python3"
    other.write_text("#!/bin/sh\n")
    other.chmod(0o755)
    assert launch_home("local[2]", environ={"PYSPARK_PYTHON": str(other)}, cache_dir=cache) is None
    # Another virtualenv's python links to the same base interpreter but may lack pyspark.
    venv_python = tmp_path / "venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    venv_python.symlink_to(os.path.realpath(sys.executable))
    env = {"PYSPARK_PYTHON": str(venv_python)}
    assert launch_home("local[2]", environ=env, cache_dir=cache) is None
    assert not cache.exists()


def test_launching_sets_spark_home_only_inside_the_block(tmp_path: Path, monkeypatch) -> None:
    if installed_home() is None:
        # pyspark installed from a Spark distribution's python/ folder, not from PyPI
        assert launch_home("local[2]", environ={"PYSPARK_PYTHON": sys.executable}) is None
        return
    monkeypatch.delenv("SPARK_HOME", raising=False)
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    with launching("local[2]", cache_dir=tmp_path / "cache") as home:
        assert home is not None and os.environ["SPARK_HOME"] == str(home)
        assert (home / "jars").is_dir() and not (home / "python" / "lib" / "pyspark.zip").exists()
    assert "SPARK_HOME" not in os.environ
