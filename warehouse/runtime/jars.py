"""The native engines' jars: resolved once from Maven into a cache, then used offline.

Spark's `kafka` format (`spark-sql-kafka-0-10`) and Delta Lake (`delta-spark`) are jars
that must match the installed pyspark. `fetch_jars` resolves them once through Spark's
own Ivy resolution (`spark.jars.packages`, the mechanism `--packages` uses) and writes a
manifest of the resolved files; sessions the framework starts then put exactly those
files on the class path (`spark.jars`) without resolving again, so later starts work
with no network. `make install` runs `warehouse jars fetch`.

Jars that pyspark already ships (Hadoop, Parquet, Jackson, ...) are left out of the
manifest: Spark's class loaders look in Spark's own jars first, so a second copy would
only be dead weight on every executor.

Resolution asks Maven Central first and the local Maven repository (`~/.m2/repository`)
only for what Central cannot give. Spark's own Ivy settings ask the local repository
first, and take an artifact from it whenever its POM is there, even when its jar is not:
a `~/.m2` that Maven filled with POMs only (as resolving another project's dependencies
leaves it) fails the whole resolution with "download failed".

Object storage has jars of its own, cached the same way under a manifest of their own
(keyed by the Hadoop version pyspark ships): Hadoop's S3 connector `hadoop-aws` and the
AWS SDK bundle it needs (`fetch_storage_jars`). Sessions the framework starts put them
on the class path whatever the engines: Spark writes every checkpoint through Hadoop.
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from warehouse.runtime.errors import JarsError

logger = logging.getLogger(__name__)

SCALA = "2.13"
MANIFEST_VERSION = 1
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
_ARTIFACT = re.compile(r"^(?P<name>.+)-\d+(\.\d+)+[\w.+-]*\.jar$")


@dataclass(frozen=True)
class NativePackages:
    """The Maven coordinates of the native engines for one pyspark (and delta-spark)."""

    spark_version: str
    delta_version: str | None

    @property
    def kafka(self) -> str:
        return f"org.apache.spark:spark-sql-kafka-0-10_{SCALA}:{self.spark_version}"

    @property
    def delta(self) -> str | None:
        if self.delta_version is None:
            return None
        major_minor = ".".join(self.spark_version.split(".")[:2])
        return f"io.delta:delta-spark_{major_minor}_{SCALA}:{self.delta_version}"

    @property
    def coordinates(self) -> list[str]:
        return [c for c in (self.kafka, self.delta) if c]

    @property
    def key(self) -> str:
        return f"spark-{self.spark_version}_delta-{self.delta_version or 'none'}"


def installed_packages() -> NativePackages:
    """The coordinates matching the installed pyspark and (when installed) delta-spark."""
    import pyspark

    try:
        delta: str | None = importlib.metadata.version("delta-spark")
    except importlib.metadata.PackageNotFoundError:
        delta = None
    return NativePackages(spark_version=pyspark.__version__, delta_version=delta)


def default_cache_dir() -> Path:
    return Path.home() / ".cache" / "spark-warehouse" / "jars"


def manifest_path(cache_dir: Path, packages: NativePackages) -> Path:
    return cache_dir / f"{packages.key}.json"


@dataclass(frozen=True)
class NativeJars:
    """Resolved jar files of the native engines, as recorded in a manifest."""

    files: tuple[Path, ...]
    kafka: bool
    delta: bool

    def spark_conf(self) -> dict[str, str]:
        """Session settings that put these jars on the class path (and turn on Delta's
        SQL extension and catalog when delta-spark is among them)."""
        conf = {"spark.jars": ",".join(str(f) for f in self.files)}
        if self.delta:
            conf["spark.sql.extensions"] = DELTA_EXTENSION
            conf["spark.sql.catalog.spark_catalog"] = DELTA_CATALOG
        return conf


def _read_manifest(path: Path) -> tuple[tuple[Path, ...], dict] | None:
    """The files a manifest records and the manifest itself, or None when it is absent,
    unreadable or stale (a recorded file is gone)."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        logger.warning("ignoring unreadable jar manifest %s: %s", path, e)
        return None
    files = tuple(Path(f) for f in data.get("files", []))
    missing = [f for f in files if not f.is_file()]
    if missing or data.get("version") != MANIFEST_VERSION:
        logger.warning(
            "jar manifest %s is stale (%d file(s) missing); run `warehouse jars fetch` again",
            path,
            len(missing),
        )
        return None
    return files, data


def _write_manifest(path: Path, manifest: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(manifest, indent=2) + "\n")
    tmp.replace(path)


def cached_jars(cache_dir: Path, packages: NativePackages | None = None) -> NativeJars | None:
    """The cached jars for the installed pyspark/delta-spark, or None when `fetch_jars`
    has not run for them (or a recorded file is gone)."""
    packages = packages or installed_packages()
    found = _read_manifest(manifest_path(cache_dir, packages))
    if found is None:
        return None
    files, data = found
    return NativeJars(files=files, kafka=bool(data.get("kafka")), delta=bool(data.get("delta")))


def artifact_name(file_name: str, *, grouped: bool) -> str:
    """`parquet-hadoop-1.17.0.jar` -> `parquet-hadoop`. Ivy retrieves files as
    `<group>_<artifact>-<version>.jar` (`grouped`); Spark ships `<artifact>-<version>.jar`."""
    base = file_name.split("_", 1)[1] if grouped else file_name
    m = _ARTIFACT.match(base)
    return m.group("name") if m else base


def spark_own_artifacts() -> set[str]:
    import pyspark

    jars = Path(pyspark.__file__).resolve().parent / "jars"
    return {artifact_name(p.name, grouped=False) for p in jars.glob("*.jar")}


MAVEN_CENTRAL = "https://repo1.maven.org/maven2/"

_IVY_SETTINGS = """<ivysettings>
  <settings defaultResolver="warehouse"/>
  <resolvers>
    <chain name="warehouse" returnFirst="true">
      <ibiblio name="central" m2compatible="true" root="{central}"/>
      <ibiblio name="local-m2" m2compatible="true" root="{local_m2}"/>
    </chain>
  </resolvers>
</ivysettings>
"""


def ivy_settings(
    ivy_dir: Path, *, central: str = MAVEN_CENTRAL, local_m2: Path | None = None
) -> Path:
    """Write the Ivy settings of a resolution into `ivy_dir`: `central` first, then the
    local Maven repository (`~/.m2/repository` by default); return the file."""
    local_m2 = local_m2 or Path.home() / ".m2" / "repository"
    ivy_dir.mkdir(parents=True, exist_ok=True)
    path = ivy_dir / "ivysettings.xml"
    path.write_text(_IVY_SETTINGS.format(central=central, local_m2=local_m2.resolve().as_uri()))
    return path


_IVY_PROBLEM = re.compile(r"download failed|NOT FOUND|UNRESOLVED|unresolved dependency|Exception")


def _ivy_problems(stderr: str) -> str:
    """What Ivy said went wrong (its failed downloads, unresolved modules, the exception),
    else the end of the child's stderr."""
    lines = stderr.strip().splitlines()
    problems = [ln.rstrip() for ln in lines if _IVY_PROBLEM.search(ln) and "Traceback" not in ln]
    return "\n".join(problems[:15] or lines[-15:])


def _resolve_in_child(
    coordinates: list[str],
    ivy_dir: Path,
    *,
    central: str = MAVEN_CENTRAL,
    local_m2: Path | None = None,
) -> list[Path]:
    """Start a throwaway local Spark JVM that resolves `coordinates` with Ivy (`ivy_settings`);
    return the files Spark put on its class path. A child process, so the caller's JVM (if
    any) is not touched."""
    settings = ivy_settings(ivy_dir, central=central, local_m2=local_m2)
    code = (
        "import sys\n"
        "from pyspark.sql import SparkSession\n"
        "s = (SparkSession.builder.master('local[1]').appName('warehouse-jars')\n"
        "     .config('spark.jars.packages', sys.argv[1]).config('spark.jars.ivy', sys.argv[2])\n"
        "     .config('spark.jars.ivySettings', sys.argv[3])\n"
        "     .config('spark.ui.enabled', 'false').getOrCreate())\n"
        "print('JARS=' + (s.sparkContext.getConf().get('spark.jars', '')))\n"
        "s.stop()\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, ",".join(coordinates), str(ivy_dir), str(settings)],
        capture_output=True,
        text=True,
        check=False,
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("JARS=")), None)
    if proc.returncode != 0 or line is None:
        raise JarsError(
            f"Could not resolve {', '.join(coordinates)} from Maven (exit {proc.returncode}). "
            f"Spark's Ivy said:\n{_ivy_problems(proc.stderr or '')}\nCheck that Maven Central "
            f"({central}) is reachable, or set "
            "`engines: {kafka: python, delta: python}` to run without the native jars."
        )
    urls = [u for u in line[len("JARS=") :].split(",") if u]
    return [Path(unquote(urlparse(u).path)) if u.startswith("file:") else Path(u) for u in urls]


def fetch_jars(cache_dir: Path, packages: NativePackages | None = None) -> NativeJars:
    """Resolve the native jars into `cache_dir` (Maven, once) and write their manifest.
    Returns at once, offline, when the manifest is already there and complete."""
    packages = packages or installed_packages()
    found = cached_jars(cache_dir, packages)
    if found is not None:
        logger.info("native jars already cached: %s", manifest_path(cache_dir, packages))
        return found
    cache_dir.mkdir(parents=True, exist_ok=True)
    logger.info("resolving %s (once; later starts use the cache)", ", ".join(packages.coordinates))
    resolved = _resolve_in_child(packages.coordinates, cache_dir / "ivy")
    own = spark_own_artifacts()
    files = [f for f in resolved if artifact_name(f.name, grouped=True) not in own]
    names = {artifact_name(f.name, grouped=True) for f in files}
    jars = NativeJars(
        files=tuple(files),
        kafka=f"spark-sql-kafka-0-10_{SCALA}" in names,
        delta=any(n.startswith("delta-spark_") for n in names),
    )
    manifest = {
        "version": MANIFEST_VERSION,
        "coordinates": packages.coordinates,
        "files": [str(f) for f in files],
        "kafka": jars.kafka,
        "delta": jars.delta,
    }
    _write_manifest(manifest_path(cache_dir, packages), manifest)
    return jars


@dataclass(frozen=True)
class StoragePackages:
    """Hadoop's S3 connector for the Hadoop version pyspark ships (its AWS SDK bundle
    comes with it)."""

    hadoop_version: str

    @property
    def coordinates(self) -> list[str]:
        return [f"org.apache.hadoop:hadoop-aws:{self.hadoop_version}"]

    @property
    def key(self) -> str:
        return f"hadoop-{self.hadoop_version}_storage"


_HADOOP_CLIENT = re.compile(r"^hadoop-client-api-(?P<version>\d+(\.\d+)+)\.jar$")


def installed_storage_packages() -> StoragePackages | None:
    """The storage coordinates for the Hadoop client pyspark ships (None: none found)."""
    import pyspark

    jars = Path(pyspark.__file__).resolve().parent / "jars"
    for jar in sorted(jars.glob("hadoop-client-api-*.jar")):
        m = _HADOOP_CLIENT.match(jar.name)
        if m:
            return StoragePackages(hadoop_version=m.group("version"))
    return None


def cached_storage_jars(
    cache_dir: Path, packages: StoragePackages | None = None
) -> tuple[Path, ...] | None:
    """The cached object-storage jars, or None when `fetch_storage_jars` has not run."""
    packages = packages or installed_storage_packages()
    if packages is None:
        return None
    found = _read_manifest(cache_dir / f"{packages.key}.json")
    return None if found is None else found[0]


def fetch_storage_jars(
    cache_dir: Path, packages: StoragePackages | None = None
) -> tuple[Path, ...]:
    """Resolve the object-storage jars into `cache_dir` (Maven, once) and write their
    manifest; offline when they are already there."""
    packages = packages or installed_storage_packages()
    if packages is None:
        raise JarsError(
            "pyspark ships no `hadoop-client-api` jar, so the version of `hadoop-aws` to "
            "fetch is unknown; put `hadoop-aws` and the AWS SDK bundle of your Hadoop on "
            "the class path yourself (`spark.jars`)."
        )
    found = cached_storage_jars(cache_dir, packages)
    if found is not None:
        return found
    cache_dir.mkdir(parents=True, exist_ok=True)
    logger.info("resolving %s (once; later starts use the cache)", ", ".join(packages.coordinates))
    resolved = _resolve_in_child(packages.coordinates, cache_dir / "ivy")
    own = spark_own_artifacts()
    files = tuple(f for f in resolved if artifact_name(f.name, grouped=True) not in own)
    manifest = {
        "version": MANIFEST_VERSION,
        "coordinates": packages.coordinates,
        "files": [str(f) for f in files],
    }
    _write_manifest(cache_dir / f"{packages.key}.json", manifest)
    return files
