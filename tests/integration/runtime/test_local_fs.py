"""The framework's local file system: permissions set without a `chmod` process."""

from __future__ import annotations

import os
import stat
import zipfile
from pathlib import Path

import pytest

from warehouse.runtime import local_fs
from warehouse.runtime.jars import default_cache_dir

pytestmark = pytest.mark.spark


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_local_sessions_create_files_with_their_permissions_through_java(spark, tmp_path) -> None:
    """`make install` built the file system and the session the framework launched on a
    local master serves `file:` with it; files and directories get the permissions
    Hadoop's own would give them, and a mode java.nio cannot set (the sticky bit) still
    goes through Hadoop's way."""
    assert local_fs.built_jar(default_cache_dir()) is not None, (
        "the local file system is not built: `make install` (`warehouse jars fetch`) builds it"
    )
    jvm = spark.sparkContext._jvm
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()
    fs = jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI("file:///"), hadoop_conf)
    assert fs.getClass().getName() == local_fs.FS_CLASS
    Path_ = jvm.org.apache.hadoop.fs.Path
    FsPermission = jvm.org.apache.hadoop.fs.permission.FsPermission

    out = fs.create(Path_(str(tmp_path / "data.txt")), True)
    out.write(b"x")
    out.close()
    umask = os.umask(0)
    os.umask(umask)
    assert _mode(tmp_path / "data.txt") == 0o666 & ~umask  # Hadoop's default for a file
    assert (tmp_path / ".data.txt.crc").is_file()  # still a checksummed file system

    assert fs.mkdirs(Path_(str(tmp_path / "a" / "b")), FsPermission(jvm.java.lang.Short(0o750)))
    assert _mode(tmp_path / "a" / "b") == 0o750 & ~umask

    fs.setPermission(Path_(str(tmp_path / "data.txt")), FsPermission(jvm.java.lang.Short(0o604)))
    assert _mode(tmp_path / "data.txt") == 0o604
    sticky = tmp_path / "shared"
    sticky.mkdir()
    fs.setPermission(Path_(str(sticky)), FsPermission(jvm.java.lang.Short(0o1777)))
    assert stat.S_IMODE(sticky.stat().st_mode) == 0o1777


def test_build_compiles_once_and_without_javac_sessions_keep_hadoops(tmp_path) -> None:
    jar = local_fs.build(tmp_path / "cache")
    assert jar is not None and jar == local_fs.built_jar(tmp_path / "cache")
    with zipfile.ZipFile(jar) as z:
        assert {
            "warehouse/hadoop/NoForkLocalFileSystem.class",
            "warehouse/hadoop/NoForkLocalFileSystem$Raw.class",
        } <= set(z.namelist())
    built = jar.stat().st_mtime_ns
    assert local_fs.build(tmp_path / "cache") == jar
    assert jar.stat().st_mtime_ns == built  # not compiled again
    conf = local_fs.session_conf({}, tmp_path / "cache")
    assert conf == {local_fs.CLASS_PATH: str(jar), local_fs.FS_IMPL: local_fs.FS_CLASS}
    # A conf that chooses a file system or a class path of its own keeps it.
    assert local_fs.session_conf({local_fs.FS_IMPL: "x.Y"}, tmp_path / "cache") == {}
    assert local_fs.session_conf({local_fs.CLASS_PATH: "/x.jar"}, tmp_path / "cache") == {}

    no_jdk = {"PATH": str(tmp_path / "nothing")}
    assert local_fs.find_javac(no_jdk) is None
    assert local_fs.build(tmp_path / "other", environ=no_jdk) is None
    assert local_fs.session_conf({}, tmp_path / "other") == {}
