"""Tables by name: each table and its quarantine registered in the session's catalog
(`catalog:` in `conf/<env>.yml`; docs/decisions/0037).

A table is registered once it exists, that is once its first batch has committed: as an
external Delta table at its location (`CREATE TABLE IF NOT EXISTS ... USING DELTA
LOCATION`), so the catalog reads the same log either engine writes and never owns the
data. Registration is SQL from the driver, which works the same on a classic and a
Spark Connect session; it needs a session that reads Delta (delta-spark on its class
path, Databricks), which `require_delta` checks before a run starts.
"""

from __future__ import annotations

import fcntl
import logging
import os
import struct
import sys
import time
from typing import TYPE_CHECKING

import streams.storage as storage
from warehouse.runtime.engines import native_available, native_package
from warehouse.runtime.errors import CatalogError
from warehouse.runtime.spark_home import DRIVER_OPTIONS
from warehouse.spec.config import SparkSettings
from warehouse.spec.paths import table_exists

if TYPE_CHECKING:
    from collections.abc import Iterable

    from pyspark.sql import SparkSession

    from warehouse.spec.model import LoadedProject

logger = logging.getLogger(__name__)

SESSION_CATALOG = "spark_catalog"


def _quoted(name: str) -> str:
    return ".".join(f"`{part}`" for part in name.split("."))


def catalog_entries(project: LoadedProject, table: str) -> list[tuple[str, str]]:
    """The table's names in the catalog with their locations: the table, then its
    quarantine; none without `catalog:`."""
    name, quarantine = project.catalog_name(table), project.quarantine_catalog_name(table)
    if name is None or quarantine is None:
        return []
    return [(name, project.table_path(table)), (quarantine, project.quarantine_path(table))]


def require_delta(spark: SparkSession, project: LoadedProject) -> None:
    """Refuse `catalog:` on a session that cannot read Delta (`CatalogError`).

    A name the session cannot read is worse than no name: `CREATE TABLE ... USING DELTA`
    fails without Delta's data source, and a name registered otherwise would fail on
    every read. So a run with the Python Delta engine on a session without delta-spark
    stops before any query starts, saying how to get one."""
    if project.config.catalog is None or native_available(spark, "delta"):
        return
    raise CatalogError(
        f"conf/{project.env}.yml: `catalog` registers the tables as Delta tables in the "
        "session's catalog, but this Spark session cannot read Delta (`io.delta.tables."
        f"DeltaTable` is not on its class path). Put `{native_package('delta')}` on the "
        "session's class path (sessions the framework starts carry it after `make install` "
        "with `spark.native_jars: true`; on a cluster, install it as a library), or remove "
        "`catalog` to keep the tables as paths only."
    )


DERBY_IN_USE = "XSDB6"
"""Derby's code for a database another process has booted (`Another instance of Derby
may have already booted the database`): embedded Derby admits one process at a time."""


def metastore_in_use(e: BaseException) -> bool:
    """Whether `e` (a Spark error, with the JVM's chain of causes) says that the session's
    embedded Derby metastore is held by another process."""
    text = f"{e} {getattr(e, '_stackTrace', None) or ''}"
    cause = e.__cause__
    return DERBY_IN_USE in text or (cause is not None and metastore_in_use(cause))


def derby_database(spark: SparkSession) -> str | None:
    """The folder of the session's embedded Derby metastore, from its JDBC URL
    (`jdbc:derby:;databaseName=<dir>;create=true` or `jdbc:derby:<dir>`); None for any
    other metastore."""
    url = spark.conf.get("spark.hadoop.javax.jdo.option.ConnectionURL", None) or ""
    if not url.startswith("jdbc:derby:") or url.startswith("jdbc:derby://"):
        return None
    attributes = url[len("jdbc:derby:") :].split(";")
    named = [a.split("=", 1)[1] for a in attributes[1:] if a.startswith("databaseName=")]
    return (named[0] if named else attributes[0]) or None


_FLOCK = struct.Struct("hhqqi4x")
"""Linux's `struct flock` (type, whence, start, len, pid) on a 64-bit machine."""


def derby_holder(database: str) -> int | None:
    """The process that has the Derby database at `database` booted, if another has:
    Derby holds a write lock on `dbex.lck` while a process has it booted (Java's file lock
    is the system's record lock, which F_GETLK asks about without taking it). None when
    no process does, or where this cannot be asked (not Linux)."""
    if sys.platform != "linux":
        return None
    try:
        fd = os.open(os.path.join(database, "dbex.lck"), os.O_RDONLY)
    except OSError:  # never booted, or not readable: Derby's own error will say
        return None
    try:
        asked = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
        kind, _, _, _, pid = _FLOCK.unpack(fcntl.fcntl(fd, fcntl.F_GETLK, asked))
    except OSError:
        return None
    finally:
        os.close(fd)
    return pid if kind != fcntl.F_UNLCK else None


def metastore_busy_error(project: LoadedProject, database: str, pid: int | None) -> CatalogError:
    """The error for a run or reset whose session cannot boot its Derby metastore."""
    who = f"another process (pid {pid})" if pid else "another process"
    return CatalogError(
        f"conf/{project.env}.yml: `catalog`: the Hive metastore that keeps the tables' "
        f"names ({database}) is in use by {who}. It is an embedded Derby database, which "
        "admits one process at a time: another `warehouse` command of this project (a "
        "continuous `run`, a `reset`) holds it until it ends. Run this when that one has "
        "ended; to run layers in processes side by side, name a metastore they can share "
        "in `spark.conf` (`spark.hadoop.hive.metastore.uris`, or a Derby network server's "
        "URL as `spark.hadoop.javax.jdo.option.ConnectionURL`)."
    )


def require_metastore(spark: SparkSession, project: LoadedProject) -> None:
    """With `catalog:`, make sure the session can reach its catalog before a run or reset
    starts: an embedded Derby metastore another process has booted (`derby_holder`)
    stops it before any table is touched, not at its first registration, and before
    Hive's client retries the database (pages of stack traces in the log)."""
    if project.config.catalog is None:
        return
    database = derby_database(spark)
    if database is None:
        return
    pid = derby_holder(database)
    if pid is not None:
        raise metastore_busy_error(project, database, pid)
    from pyspark.errors import PySparkException

    try:
        spark.catalog.databaseExists("default")
    except PySparkException as e:
        if metastore_in_use(e):  # booted since, or not Linux
            raise metastore_busy_error(project, database, None) from e
        raise


def register(spark: SparkSession, name: str, location: str, *, table: str) -> None:
    """Register the Delta table at `location` as `name` (`catalog.schema.table`), creating
    its schema where there is none. Idempotent: a name already there is left as it is."""
    schema = name.rsplit(".", 1)[0]
    escaped = location.replace("\\", "\\\\").replace("'", "\\'")
    from pyspark.errors import PySparkException

    try:
        spark.sql(f"CREATE SCHEMA IF NOT EXISTS {_quoted(schema)}")
        spark.sql(f"CREATE TABLE IF NOT EXISTS {_quoted(name)} USING DELTA LOCATION '{escaped}'")
    except PySparkException as e:  # the catalog's own error, named and chained
        raise CatalogError(
            f"Table `{table}`: the catalog refused to register it as `{name}` at "
            f"{location}: {str(e).strip().splitlines()[0]}. Check that the schema "
            f"`{schema}` can be created and written there (the `catalog` setting), and that "
            "the session may create external tables at that location.",
            table=table,
        ) from e
    logger.info("table %s: registered as %s at %s", table, name, location)


def unregister(spark: SparkSession, project: LoadedProject, table: str) -> list[str]:
    """Drop the table's and its quarantine's names from the catalog (not their data:
    they are external); the names dropped."""
    dropped = []
    for name, _ in catalog_entries(project, table):
        if spark.catalog.tableExists(name):
            spark.sql(f"DROP TABLE IF EXISTS {_quoted(name)}")
            dropped.append(name)
    if dropped:
        logger.info("table %s: dropped %s from the catalog", table, ", ".join(dropped))
    return dropped


class Registrar:
    """Registers a run's tables as they come into being: `check` registers each table and
    quarantine that exists and is not registered by this run yet (a table's first commit,
    a quarantine's first row). Cheap when nothing is left: one existence check per
    pending location.

    Concurrency: called from the thread that runs the pipeline only."""

    def __init__(self, spark: SparkSession, project: LoadedProject, tables: Iterable[str]) -> None:
        self.spark = spark
        self.pending: dict[str, tuple[str, str]] = {
            name: (location, table)
            for table in tables
            for name, location in catalog_entries(project, table)
        }
        self._checked = float("-inf")

    def check(self, *, every: float = 0.0) -> None:
        """Register what has appeared; `every`: not again within that many seconds."""
        now = time.monotonic()
        if not self.pending or now - self._checked < every:
            return
        self._checked = now
        for name, (location, table) in list(self.pending.items()):
            if table_exists(location):
                register(self.spark, name, location, table=table)
                del self.pending[name]


METASTORE_DIR = "_catalog"
"""Under a local warehouse root: the Hive metastore (Derby) and the managed-table
warehouse of the sessions the framework starts with `catalog:` (docs/decisions/0037)."""


def metastore_conf(project: LoadedProject) -> dict[str, str]:
    """Spark settings that give a session the framework starts a persistent session
    catalog for `catalog: {catalog: spark_catalog}`: Spark's Hive metastore in an embedded
    Derby database under `<root>/_catalog`, so the names outlive the process and the next
    command sees them. Nothing for another catalog (a Unity Catalog is the cluster's), for
    a root on object storage (Derby keeps its files on a local disk: name a metastore in
    `spark.conf`, e.g. `spark.hadoop.hive.metastore.uris`), or for a Spark Connect server
    (its catalog is the server's)."""
    catalog = project.config.catalog
    root = storage.local_path(project.root)
    if (
        catalog is None
        or catalog.catalog != SESSION_CATALOG
        or root is None
        or project.config.spark.remote
    ):
        return {}
    base = os.path.join(root, METASTORE_DIR)
    return {
        # Derby's log beside its database, not in whatever folder the command ran from.
        DRIVER_OPTIONS: f"-Dderby.stream.error.file={os.path.join(base, 'derby.log')}",
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": os.path.join(base, "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": (
            f"jdbc:derby:;databaseName={os.path.join(base, 'metastore_db')};create=true"
        ),
    }


def session_settings(project: LoadedProject) -> SparkSettings:
    """`spark:` of the project for a session the framework starts: `metastore_conf` under
    the project's own `spark.conf` (which may name another metastore); makes the
    metastore's folder."""
    spark = project.config.spark
    extra = metastore_conf(project)
    if not extra:
        return spark
    # Derby opens its log when it starts, before it creates the database's folder.
    os.makedirs(os.path.join(storage.local_path(project.root) or "", METASTORE_DIR), exist_ok=True)
    conf = {**extra, **spark.conf}
    if DRIVER_OPTIONS in spark.conf:  # the project's Java options, and Derby's log file
        conf[DRIVER_OPTIONS] = f"{extra[DRIVER_OPTIONS]} {spark.conf[DRIVER_OPTIONS]}"
    return spark.model_copy(update={"conf": conf})
