"""A class archive (Java's application class-data sharing) for local sessions' JVMs.

A local session's JVM loads about 25,000 classes of Spark, Delta and their libraries,
parsing and verifying each, before and during its first queries. Java can keep them
parsed and verified in an archive made by an earlier JVM (`-XX:ArchiveClassesAtExit`)
and map it at start (`-XX:SharedArchiveFile`). A new process's session started in 4.0 s
with one against 7.2 s without, and with a first Delta write, read, MERGE and streaming
query it ran for 0.75 of the time (docs/benchmarks.md, "Session start").

`warehouse jars fetch` (which `make install` runs) makes the archive once, in a child
process whose session runs a little of everything, and names it by what it is valid
for: the `java` that launches Spark and the jars of the SPARK_HOME it is launched with.
Sessions the framework launches on a local master use it; an archive for another Java
or another Spark is never passed to a JVM, and one a JVM refuses anyway (its
class path changed) costs nothing: the JVM loads the classes from the jars, silently.
A torn archive file would crash the JVM, so an archive is renamed into place only
after its JVM has exited and a `java -version` has mapped it (`maps_whole`), and is
used only at the size it was recorded with. An archive damaged in place (its size
kept) can still crash a JVM once it loads a class through it; the session then starts
again without it and removes it (`get_session`, `discard`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from warehouse.runtime import local_fs
from warehouse.runtime.errors import ClassArchiveError
from warehouse.runtime.jars import default_cache_dir as jars_cache_dir
from warehouse.runtime.spark_home import DRIVER_OPTIONS, default_cache_dir, launch_home, launch_java

logger = logging.getLogger(__name__)

ARCHIVE_DIR = "class-archives"
"""Under the framework's cache (`~/.cache/spark-warehouse`)."""

JAVA_FLAGS = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")
"""Java 17 writes the archive's notes (a class it skipped, an archive it refused) to
stdout, where they would mix with the CLI's output."""

_OWN_CDS = ("SharedArchiveFile", "ArchiveClassesAtExit", "-Xshare", "SharedClassListFile")
"""Java options that choose class-data sharing themselves; a session with any of them
is launched without ours."""


@dataclass(frozen=True)
class Launch:
    """A JVM launch an archive is valid for: the `java` binary and the SPARK_HOME."""

    java: Path
    spark_home: Path
    class_path: str = ""
    """The driver's extra class path (`spark.driver.extraClassPath`), which Spark's
    launcher puts before its own jars: Java maps an archive only for the class path it
    was made with."""

    @property
    def key(self) -> str:
        """A hash of the Java build, of the name, size and time of every jar Spark
        puts on the JVM's class path, and of the extra class path: a different Java, a
        pyspark installed again, or another class path gets an archive of its own."""
        parts = [str(self.java), str(self.spark_home)]
        java_home = self.java.parent.parent
        for f in (java_home / "release", java_home / "lib" / "server" / "libjvm.so"):
            parts.append(_stamp(f))
        jars = self.spark_home / "jars"
        parts.extend(_stamp(j) for j in sorted(jars.glob("*.jar")))
        if self.class_path:
            parts.append(self.class_path)
            parts.extend(_stamp(Path(p)) for p in self.class_path.split(os.pathsep) if p)
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _stamp(path: Path) -> str:
    try:
        st = path.stat()
    except OSError:
        return f"{path.name} -"
    return f"{path.name} {st.st_size} {st.st_mtime_ns}"


def launch_for(
    spark_home: Path | None, environ: Mapping[str, str], *, class_path: str = ""
) -> Launch | None:
    """The launch of a local session's JVM with `spark_home` (None: Spark's default, the
    installed pyspark) and the driver's extra `class_path`, or None when there is no
    `java` to run."""
    java = launch_java(environ)
    if java is None:
        return None
    if spark_home is None:
        if environ.get("SPARK_HOME"):
            spark_home = Path(environ["SPARK_HOME"])
        else:
            import pyspark

            spark_home = Path(pyspark.__file__).resolve().parent
    return Launch(java=java, spark_home=spark_home, class_path=class_path)


def session_launch(environ: Mapping[str, str]) -> Launch | None:
    """The launch of the JVM of a local session the framework starts from this process
    (whose Python workers run this interpreter unless `PYSPARK_PYTHON` says otherwise)."""
    env = {"PYSPARK_PYTHON": sys.executable, **environ}
    return launch_for(launch_home("local[1]", environ=env), env, class_path=session_class_path())


def session_class_path() -> str:
    """The driver's extra class path a local session the framework starts gets when its
    conf names none: the local file system's jar, when built (`local_fs`)."""
    return local_fs.session_conf({}, jars_cache_dir()).get(local_fs.CLASS_PATH, "")


def archive_dir(cache_dir: Path) -> Path:
    return cache_dir / ARCHIVE_DIR


@dataclass(frozen=True)
class ClassArchive:
    """An archive in the cache: its file, its size, and the record written with it (the
    launch it was made for, its size, when it was made)."""

    path: Path
    size: int
    record: Mapping[str, object]


def cached_archive(cache_dir: Path, launch: Launch) -> ClassArchive | None:
    """The archive made for `launch`, when there is one whole: at the size recorded when
    it was made."""
    base = archive_dir(cache_dir) / launch.key
    try:
        record = json.loads(base.with_suffix(".json").read_text())
        size = base.with_suffix(".jsa").stat().st_size
    except (OSError, ValueError):
        return None
    if record.get("size") != size:
        logger.warning(
            "ignoring the class archive %s: %d bytes, made with %s",
            base.with_suffix(".jsa"),
            size,
            record.get("size"),
        )
        return None
    return ClassArchive(path=base.with_suffix(".jsa"), size=size, record=record)


def session_archive(environ: Mapping[str, str]) -> tuple[Path, ClassArchive | None]:
    """The framework's cache (`~/.cache/spark-warehouse`) and the archive in it for a
    local session launched from this process, or None."""
    cache = default_cache_dir(environ)
    launch = session_launch(environ)
    return cache, None if launch is None else cached_archive(cache, launch)


def chooses_own(options: str, environ: Mapping[str, str]) -> bool:
    """Whether the driver's Java options (or the variables the `java` launcher reads)
    choose class-data sharing themselves."""
    texts = (options, environ.get("JDK_JAVA_OPTIONS", ""), environ.get("JAVA_TOOL_OPTIONS", ""))
    return any(flag in text for text in texts for flag in _OWN_CDS)


def launch_archive(
    conf: Mapping[str, str],
    spark_home: Path | None,
    *,
    cache_dir: Path,
    environ: Mapping[str, str],
) -> ClassArchive | None:
    """The class archive of this launch, when there is one and the driver's Java options
    (`conf`) choose no class-data sharing of their own."""
    if chooses_own(conf.get(DRIVER_OPTIONS, ""), environ):
        return None
    launch = launch_for(spark_home, environ, class_path=conf.get(local_fs.CLASS_PATH, ""))
    archive = None if launch is None else cached_archive(cache_dir, launch)
    if archive is None:
        logger.debug("no class archive for this Java and Spark in %s", archive_dir(cache_dir))
    return archive


def archive_options(archive: ClassArchive) -> str:
    """The Java options that map `archive`."""
    return " ".join([f"-XX:SharedArchiveFile={archive.path}", *JAVA_FLAGS])


def discard(archive: ClassArchive) -> None:
    """Remove `archive` and its record: a damaged one (`warehouse jars fetch` makes a
    new one). A JVM that has it mapped keeps its mapping."""
    archive.path.unlink(missing_ok=True)
    archive.path.with_suffix(".json").unlink(missing_ok=True)


_EXERCISE = """
import json, shutil, sys, tempfile
from pathlib import Path
from warehouse.runtime.session import get_session
from warehouse.spec.config import SparkSettings
from streams.delta import native_delta_available

out, ran = sys.argv[1], sys.argv[2]
flags = "-XX:ArchiveClassesAtExit=" + out + " " + " ".join(sys.argv[3:])
spark = get_session(SparkSettings(master="local[1]", conf={
    "spark.driver.extraJavaOptions": flags, "spark.sql.shuffle.partitions": "1"}),
    app_name="warehouse-class-archive")
root = Path(tempfile.mkdtemp(prefix="warehouse-class-archive-"))
exercised = ["sql"]
df = spark.range(100).selectExpr("id", "cast(id AS string) AS v", "current_timestamp() AS ts")
spark.read.json(spark.sparkContext.parallelize(['{"a": 1}'])).collect()
df.groupBy("v").count().collect()
if native_delta_available(spark):
    from delta.tables import DeltaTable
    t, u = str(root / "t"), str(root / "u")
    df.write.format("delta").save(t)
    spark.read.format("delta").load(t).where("id > 5").collect()
    (DeltaTable.forPath(spark, t).alias("t").merge(df.alias("s"), "t.id = s.id")
     .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
    q = (spark.readStream.format("delta").load(t).writeStream
         .foreachBatch(lambda b, i: b.write.format("delta").mode("append").save(u))
         .option("checkpointLocation", str(root / "c")).trigger(availableNow=True).start())
    q.awaitTermination()
    exercised.append("delta")
try:
    spark.readStream.format("kafka").option("kafka.bootstrap.servers", "127.0.0.1:9") \\
        .option("subscribe", "t").load()
    exercised.append("kafka")
except Exception:  # no Kafka connector in this session
    pass
Path(ran).write_text(json.dumps(exercised))
jvm = spark.sparkContext._gateway.proc
spark.stop()
shutil.rmtree(root, ignore_errors=True)
jvm.stdin.close()
sys.exit(jvm.wait(timeout=600))
"""
"""The child's session: Spark SQL and JSON; a Delta write, read, MERGE and streaming
query, and the Kafka source's classes, where the session has their jars; then its JVM's
exit, which writes the archive. What it ran is written to its second argument."""


def make_archive(cache_dir: Path, *, environ: Mapping[str, str] | None = None) -> ClassArchive:
    """Make the class archive of a local session launched as the framework launches one,
    in a child process, and keep it in `cache_dir` under its launch's key; prune the
    archives of launches that are gone. Raises `ClassArchiveError` when the child fails."""
    env = dict(os.environ if environ is None else environ)
    launch = session_launch(env)
    if launch is None:
        raise ClassArchiveError("no `java` to make a class archive with (JAVA_HOME, PATH)")
    found = cached_archive(cache_dir, launch)
    if found is not None:
        return found
    folder = archive_dir(cache_dir)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{launch.key}-{uuid.uuid4().hex}.jsa"
    ran = tmp.with_suffix(".ran")
    began = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _EXERCISE, str(tmp), str(ran), *JAVA_FLAGS],
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=900,
        )
        if proc.returncode != 0 or not tmp.is_file() or not ran.is_file():
            tail = "\n".join((proc.stderr or "").strip().splitlines()[-10:])
            raise ClassArchiveError(
                f"the child JVM did not write a class archive (exit {proc.returncode}):\n{tail}"
            )
        if not maps_whole(launch.java, tmp):
            raise ClassArchiveError(f"the class archive the child JVM wrote does not load ({tmp})")
        size = tmp.stat().st_size
        record = {
            "java": str(launch.java),
            "spark_home": str(launch.spark_home),
            "jars": str((launch.spark_home / "jars").resolve()),
            "size": size,
            "made": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "seconds": round(time.monotonic() - began, 1),
            "exercised": json.loads(ran.read_text()),
        }
        base = folder / launch.key
        base.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
        tmp.replace(base.with_suffix(".jsa"))
    finally:
        tmp.unlink(missing_ok=True)
        ran.unlink(missing_ok=True)
    prune(cache_dir, keep=launch.key)
    made = cached_archive(cache_dir, launch)
    assert made is not None  # just written whole
    return made


def maps_whole(java: Path, archive: Path) -> bool:
    """Whether `java` maps `archive` and exits cleanly (`-version`). Java maps an archive
    before it checks the class path the archive was made with, and a torn one crashes it
    there; an archive it refuses (another Java's) passes, as it would at a session's
    start."""
    # A crash writes its report (hs_err_pid<N>.log) to the working directory unless told.
    command = [str(java), f"-XX:SharedArchiveFile={archive}", *JAVA_FLAGS]
    command += ["-XX:ErrorFile=/dev/null", "-XX:-CreateCoredumpOnCrash", "-version"]
    proc = subprocess.run(command, capture_output=True, check=False, timeout=120)
    return proc.returncode == 0


def prune(cache_dir: Path, *, keep: str) -> list[Path]:
    """Remove the archives whose Spark jars are gone (a virtualenv deleted), or which
    were made for the same SPARK_HOME as `keep` (a Java or pyspark since replaced);
    returns the archives removed. An archive is about 190 MB."""
    folder = archive_dir(cache_dir)
    try:
        kept = json.loads((folder / f"{keep}.json").read_text())
    except (OSError, ValueError):
        kept = {}
    removed = []
    for record_file in folder.glob("*.json"):
        if record_file.stem == keep:
            continue
        try:
            record = json.loads(record_file.read_text())
        except (OSError, ValueError):
            record = {}
        gone = not Path(str(record.get("jars", ""))).is_dir()
        if gone or record.get("spark_home") == kept.get("spark_home"):
            archive = record_file.with_suffix(".jsa")
            archive.unlink(missing_ok=True)
            record_file.unlink(missing_ok=True)
            removed.append(archive)
    for stale in folder.glob(".*"):  # of a child killed while writing an archive
        try:
            if time.time() - stale.stat().st_mtime > 3600:
                stale.unlink()
        except FileNotFoundError:  # another `jars fetch` renamed or removed it
            pass
    return removed
