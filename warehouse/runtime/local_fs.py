"""Hadoop's local file system without a process per file created, for local sessions.

Without Hadoop's native library (pip's pyspark has none), Hadoop's local file system
sets the permission of every file and directory it creates by starting `chmod`: two
processes per file with its checksum file, 18.9 per micro-batch of a streaming
aggregation into Delta (its offsets and commit log entries, its state, Delta's log and
data files), each a wait inside the batch. `NoForkLocalFileSystem`
(java/NoForkLocalFileSystem.java) sets them with java.nio and leaves every other call to
Hadoop: such a batch cost 0.89 of the CPU and wall time it took with Hadoop's
(docs/benchmarks.md, "Local file system: the processes Hadoop starts").

`warehouse jars fetch` (which `make install` runs) compiles it once against the Hadoop
client of the installed pyspark, with the `javac` beside the `java` that launches Spark
(or the first on PATH); without a `javac` sessions keep Hadoop's own. A session on a
local master puts the jar on the driver's class path (Spark's launcher needs the class
before it reads `spark.jars`) and names the class as `fs.file.impl`, unless its conf
names a file system or a class path itself.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path

from warehouse.runtime.spark_home import launch_java

logger = logging.getLogger(__name__)

FS_CLASS = "warehouse.hadoop.NoForkLocalFileSystem"
SOURCE = Path(__file__).with_name("java") / "NoForkLocalFileSystem.java"
FOLDER = "local-fs"
"""Under the jars cache (`warehouse.runtime.jars.default_cache_dir`)."""

FS_IMPL = "spark.hadoop.fs.file.impl"
CLASS_PATH = "spark.driver.extraClassPath"

LOG_STORE_CLASS = "warehouse.delta.LocalListingLogStore"
"""Delta's log store for `file:` paths: `LocalListingLogStore` (java/LocalListingLogStore.java)
lists a log reading the status of only the files it returns. Its jar goes in `spark.jars`
beside delta-storage, whose class loader must see both."""
LOG_STORE_SOURCE = Path(__file__).with_name("java") / "LocalListingLogStore.java"
LOG_STORE_IMPL = "spark.delta.logStore.file.impl"
DELTA_LOCAL_LOG_STORE = "io.delta.storage.LocalLogStore"
"""What local sessions use without the framework's log store, which extends it."""


def _hadoop_client() -> Path | None:
    """The Hadoop client API jar of the installed pyspark."""
    import pyspark

    jars = Path(pyspark.__file__).resolve().parent / "jars"
    found = sorted(jars.glob("hadoop-client-api-*.jar"))
    return found[-1] if found else None


def _jar_and_client(cache_dir: Path) -> tuple[Path, Path] | None:
    client = _hadoop_client()
    if client is None:
        return None
    key = hashlib.sha256(SOURCE.read_bytes() + client.name.encode()).hexdigest()[:16]
    return cache_dir / FOLDER / f"no-fork-local-fs-{key}.jar", client


def jar_path(cache_dir: Path) -> Path | None:
    """Where the jar for this source and the installed pyspark's Hadoop lives (whether
    or not it was built), or None without a Hadoop client jar."""
    found = _jar_and_client(cache_dir)
    return found[0] if found else None


def built_jar(cache_dir: Path) -> Path | None:
    """The jar when `build` made it for this source and Hadoop, else None."""
    path = jar_path(cache_dir)
    return path if path is not None and path.is_file() else None


def find_javac(environ: Mapping[str, str]) -> Path | None:
    """The `javac` beside the `java` Spark launches (JAVA_HOME, PATH), else the first
    `javac` on PATH."""
    java = launch_java(environ)
    if java is not None and (java.parent / "javac").is_file():
        return java.parent / "javac"
    found = shutil.which("javac", path=environ.get("PATH"))
    return Path(found) if found else None


def build(cache_dir: Path, *, environ: Mapping[str, str] | None = None) -> Path | None:
    """Compile the file system into its jar in `cache_dir` (once: an existing one is
    returned). None, with the reason logged, when there is no `javac` or it fails: the
    sessions then keep Hadoop's own local file system."""
    env = dict(os.environ if environ is None else environ)
    found = _jar_and_client(cache_dir)
    if found is None:
        logger.info("no Hadoop client jar in the installed pyspark: nothing to build")
        return None
    path, client = found
    return _compile(
        SOURCE,
        [client],
        path,
        env,
        fallback="local sessions keep Hadoop's local file system, which starts a `chmod` "
        "process for every file it creates",
    )


def _log_store_jar(cache_dir: Path, delta_storage: Path) -> tuple[Path, Path] | None:
    client = _hadoop_client()
    if client is None:
        return None
    key = hashlib.sha256(
        LOG_STORE_SOURCE.read_bytes() + client.name.encode() + delta_storage.name.encode()
    ).hexdigest()[:16]
    return cache_dir / FOLDER / f"local-log-store-{key}.jar", client


def delta_storage(jars: str) -> Path | None:
    """The delta-storage jar among `spark.jars`-style `jars`, or None."""
    found = [Path(j) for j in jars.split(",") if "delta-storage-" in Path(j).name]
    return found[0] if found else None


def build_log_store(
    cache_dir: Path, delta_storage: Path, *, environ: Mapping[str, str] | None = None
) -> Path | None:
    """Compile `LocalListingLogStore` against `delta_storage` into its jar in `cache_dir`
    (once). None, with the reason logged, when there is no Hadoop client, no `javac` or it
    fails: local sessions then keep Delta's own log store."""
    env = dict(os.environ if environ is None else environ)
    found = _log_store_jar(cache_dir, delta_storage)
    if found is None:
        return None
    path, client = found
    return _compile(
        LOG_STORE_SOURCE,
        [client, delta_storage],
        path,
        env,
        fallback="local sessions keep Delta's own log store",
    )


def _compile(
    source: Path,
    class_path: list[Path],
    path: Path,
    env: dict[str, str],
    *,
    fallback: str,
) -> Path | None:
    """`source` compiled against `class_path` into the jar `path`, once (an existing one is
    returned); None, with `fallback` (what sessions do without it) logged, when there is
    no `javac` or it fails."""
    if path.is_file():
        return path
    javac = find_javac(env)
    if javac is None:
        logger.warning("no `javac` (a JDK) found: %s", fallback)
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as out:
        cp = os.pathsep.join(str(p) for p in class_path)
        proc = subprocess.run(
            [str(javac), "--release", "17", "-nowarn", "-cp", cp, "-d", out, str(source)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=300,
        )
        if proc.returncode != 0:
            logger.warning(
                "compiling %s failed (%s):\n%s",
                source.name,
                fallback,
                (proc.stderr or proc.stdout).strip()[-2000:],
            )
            return None
        tmp = Path(out) / "fs.jar"
        with zipfile.ZipFile(tmp, "w") as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n\n")
            for f in sorted(Path(out).rglob("*.class")):
                jar.write(f, f.relative_to(out).as_posix())
        tmp.replace(path)
    logger.info("built %s", path)
    return path


def session_conf(conf: Mapping[str, str], cache_dir: Path) -> dict[str, str]:
    """The settings that give a local session the file system (its jar on the driver's
    class path, `fs.file.impl`), unless it is not built or `conf` chooses a file system or
    a class path itself; and, where `conf`'s `spark.jars` hold delta-storage, the log
    store (its jar after them, `spark.delta.logStore.file.impl`) in place of Delta's
    `LocalLogStore`, unless it is not built or `conf` chooses another `file:` log store."""
    out: dict[str, str] = {}
    jar = built_jar(cache_dir)
    if jar is not None and FS_IMPL not in conf and CLASS_PATH not in conf:
        out.update({CLASS_PATH: str(jar), FS_IMPL: FS_CLASS})
    jars = conf.get("spark.jars", "")
    storage_jar = delta_storage(jars)
    if storage_jar is not None and conf.get(LOG_STORE_IMPL, DELTA_LOCAL_LOG_STORE) == (
        DELTA_LOCAL_LOG_STORE
    ):
        found = _log_store_jar(cache_dir, storage_jar)
        if found is not None and found[0].is_file():
            out.update({"spark.jars": f"{jars},{found[0]}", LOG_STORE_IMPL: LOG_STORE_CLASS})
    return out
