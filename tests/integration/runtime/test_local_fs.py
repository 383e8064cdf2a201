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


def _names(statuses) -> list[str]:
    out = []
    while statuses.hasNext():
        out.append(statuses.next().getPath().getName())
    return out


def test_local_sessions_list_a_delta_log_as_delta_does_stating_only_what_they_return(
    spark, tmp_path
) -> None:
    """The session the framework launched on a local master with the native jars names the
    framework's log store for `file:`; its `listFrom` gives what Delta's `LocalLogStore`
    gives over a real log (commits, Delta's own `.crc` files, a checkpoint, Hadoop's
    hidden checksum files, a commit's leftover temporary file, a folder), from any name,
    and fails the same way on a missing folder."""
    from deltalake import DeltaTable, write_deltalake

    conf = spark.sparkContext.getConf()
    assert conf.get(local_fs.LOG_STORE_IMPL) == local_fs.LOG_STORE_CLASS, (
        "the framework's log store is not in this session: `make install` (`warehouse jars "
        "fetch`) builds it with the native jars"
    )
    table = tmp_path / "t"
    for i in range(12):
        write_deltalake(str(table), pa_rows(i), mode="append")
    DeltaTable(str(table)).create_checkpoint()
    log = table / "_delta_log"
    (log / "00000000000000000003.crc").write_text("{}")
    (log / ".00000000000000000004.json.crc").write_bytes(b"")
    (log / ".00000000000000000012.json.0f1e.tmp").write_text("")
    (log / "_commits").mkdir()

    jvm = spark.sparkContext._jvm
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()
    store = jvm.warehouse.delta.LocalListingLogStore(hadoop_conf)
    delta = jvm.io.delta.storage.LocalLogStore(hadoop_conf)
    Path_ = jvm.org.apache.hadoop.fs.Path
    for start in ("00000000000000000000.", "00000000000000000003.", "00000000000000000011."):
        at = Path_(str(log / start))
        got = _names(store.listFrom(at, hadoop_conf))
        assert got == _names(delta.listFrom(at, hadoop_conf)), start
        assert got and all(name >= start for name in got)
    assert "00000000000000000011.checkpoint.parquet" in got and "_commits" in got
    from py4j.protocol import Py4JJavaError

    with pytest.raises(Py4JJavaError, match="FileNotFoundException"):
        store.listFrom(Path_(str(tmp_path / "none" / "_delta_log" / "0.")), hadoop_conf)


def pa_rows(i: int):
    import pyarrow as pa

    return pa.table({"i": [i]})


def test_the_log_store_is_built_once_and_named_only_in_place_of_deltas_local_one(
    tmp_path,
) -> None:
    from warehouse.runtime.jars import cached_jars

    jars = cached_jars(default_cache_dir())
    assert jars is not None, "the native jars are not cached: `make install` caches them"
    spark_jars = ",".join(str(f) for f in jars.files)
    storage = local_fs.delta_storage(spark_jars)
    assert storage is not None
    cache = tmp_path / "cache"
    delta_default = {
        "spark.jars": spark_jars,
        local_fs.LOG_STORE_IMPL: local_fs.DELTA_LOCAL_LOG_STORE,
    }
    # Not built: Delta's own store stays.
    assert local_fs.LOG_STORE_IMPL not in local_fs.session_conf(delta_default, cache)
    jar = local_fs.build_log_store(cache, storage)
    assert jar is not None
    with zipfile.ZipFile(jar) as z:
        assert "warehouse/delta/LocalListingLogStore.class" in z.namelist()
    built = jar.stat().st_mtime_ns
    assert local_fs.build_log_store(cache, storage) == jar
    assert jar.stat().st_mtime_ns == built  # not compiled again
    conf = local_fs.session_conf(delta_default, cache)
    assert conf[local_fs.LOG_STORE_IMPL] == local_fs.LOG_STORE_CLASS
    assert conf["spark.jars"] == f"{spark_jars},{jar}"
    # A store of the project's own choosing stays; so do sessions without delta-storage.
    own = {**delta_default, local_fs.LOG_STORE_IMPL: "x.Y"}
    assert local_fs.LOG_STORE_IMPL not in local_fs.session_conf(own, cache)
    assert local_fs.LOG_STORE_IMPL not in local_fs.session_conf({"spark.jars": "/a.jar"}, cache)
