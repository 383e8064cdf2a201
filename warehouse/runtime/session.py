"""The SparkSession factory: reuse the caller's session, otherwise build a local one.

A notebook, `spark-submit` or a test already has a session; the framework must
use it and never create a second one (two sessions in one JVM share a context
but not temp views or conf, which breaks the query builder).
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import streams.storage as storage
from warehouse.errors import root_cause_line
from warehouse.runtime import local_fs
from warehouse.runtime.class_archive import (
    ClassArchive,
    archive_options,
    discard,
    launch_archive,
)
from warehouse.runtime.errors import SessionStartError
from warehouse.runtime.jars import cached_jars, cached_storage_jars, default_cache_dir
from warehouse.runtime.spark_home import (
    DRIVER_OPTIONS,
    launch_home,
    launching,
    with_driver_options,
)
from warehouse.runtime.spark_home import default_cache_dir as spark_cache_dir
from warehouse.spec.config import SparkSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)

# Local defaults; anything in `spark.conf` of the environment overrides them.
LOCAL_DEFAULTS: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    # query.stop() waits this long for the running micro-batch before interrupting it.
    "spark.sql.streaming.stopTimeout": "120s",
    # The runner prints one progress line per table; Spark's stage bars would interleave.
    "spark.ui.showConsoleProgress": "false",
    # How long an idle query waits before asking its source for new data again (Spark's
    # default 10 ms). Each ask of a Python source is a round trip to its Python worker
    # and, for Kafka, offset requests to the broker: an idle Kafka query used 0.46 of a
    # core at 10 ms and 0.04 at 500 ms. A query that has data still runs batches back to
    # back; a record arriving at an idle query waits at most this long more.
    "spark.sql.streaming.pollingDelay": "500ms",
    # Spark keeps the classes it generates for plans in an LRU of this many (default 100)
    # and compiles a plan's code again whenever it fell out. The example warehouse's
    # four order-path queries alone generate 134 distinct pieces of code per round of
    # batches, so at 100 every batch compiled again what the last one had: 420 of 677
    # compilations in a 40 s continuous run were of code compiled before, and the JIT
    # then compiled each new class again (docs/decisions/0026).
    "spark.sql.codegen.cache.maxEntries": "1000",
}


def existing_session() -> SparkSession | None:
    """The session already running in this process (active in this thread, or the default)."""
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is None:
        # The default session of another thread (a notebook's `spark` seen from a worker thread).
        session = SparkSession._instantiatedSession
        if session is not None and getattr(session._sc, "_jsc", None) is None:  # stopped
            session = None
    return session


def get_session(
    config: SparkSettings,
    *,
    app_name: str | None = None,
    object_storage: bool = False,
    run: Run | None = None,
) -> SparkSession:
    """Return the running SparkSession if there is one, else build one from `config`.

    When building, `config.master` and `config.conf` are applied over
    `LOCAL_DEFAULTS` (UI off unless `spark.ui.enabled` is set, UTC session
    time zone). `PYSPARK_PYTHON` / `PYSPARK_DRIVER_PYTHON` default to the
    running interpreter so that Python workers see the same packages.
    `object_storage`: the session reads or writes object storage (a project whose root
    is a URI), so it gets the cached `hadoop-aws` and AWS SDK on its class path; every
    session gets Hadoop's `s3a` settings. `run`, what the session serves, sets a local
    JVM's compilation (`_with_jit`): `landing_once`, one run that processes what is there
    and ends, of tables whose records pass by the JVM's code (`warehouse run --once` of
    tables on the Arrow landing path); `continuous`, queries that keep running.
    """
    session = existing_session()
    if session is not None:
        logger.debug("reusing the running SparkSession")
        return session
    if config.remote:
        return connect_session(config, app_name=app_name)
    from pyspark.sql import SparkSession

    from warehouse.runtime import numpy_converters

    numpy_converters.install()  # before the first call to the JVM
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    conf = {**LOCAL_DEFAULTS, **local_conf(config.master)}
    conf = {**conf, **_native_jars_conf(config), **config.conf}
    if not _submitted():
        extra = _storage_conf(config, conf, jars=object_storage)
        jars = {"spark.jars": extra["spark.jars"]} if "spark.jars" in extra else {}
        conf = {**extra, **conf, **jars}
        conf = _with_region_size(_with_log_config(conf), config.master)
        if run is not None:
            conf = _with_jit(conf, config.master, os.environ, run)
        if run == "continuous":
            conf = _with_perf_sampling(conf, config.master, os.environ)
        if local_cores(config.master) is not None:
            jars_cache = Path(config.jars_cache) if config.jars_cache else default_cache_dir()
            conf = {**conf, **local_fs.session_conf(conf, jars_cache)}
    builder = SparkSession.builder.appName(app_name or config.app_name)
    if not _submitted():
        builder = builder.master(config.master)
    for key, value in conf.items():
        builder = builder.config(key, value)
    logger.info("starting a SparkSession: master=%s app=%s", config.master, app_name)
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    try:
        if _submitted():
            session = builder.getOrCreate()
        else:
            # workers import pyspark compiled (spark_home); a local JVM listens on loopback
            with launching(config.master) as home, _loopback(config.master):
                archive = _class_archive(conf, config.master, home)
                session = _launch_local(builder, conf, archive)
    except (PySparkException, Py4JError, OSError) as e:
        raise _start_failure(config.master, e) from e
    session.sparkContext.setLogLevel(conf.get("warehouse.logLevel", "WARN"))
    if not _submitted():
        _jvm_ignores_sigterm(session)
    return session


def _jvm_ignores_sigterm(session: SparkSession) -> None:
    """The JVM this process launched ignores SIGTERM from now on.

    It ends with this process anyway: pyspark's gateway exits when its standard input,
    a pipe from this process, closes, which a SIGKILL of this process does too. A
    SIGTERM sent to every process of a service at once (systemd's default
    `KillMode=control-group`, `kill -TERM -<pgid>`) then stops a continuous run between
    batches, as one sent to this process does, instead of ending the JVM under the run
    mid-batch (the run then failed with py4j's connection errors and exit status 1).
    pyspark already keeps SIGINT from the JVM, for Ctrl-C."""
    from py4j.protocol import Py4JError

    jvm = session._jvm
    try:
        jvm.sun.misc.Signal.handle(jvm.sun.misc.Signal("TERM"), jvm.sun.misc.SignalHandler.SIG_IGN)
    except Py4JError as e:  # a JVM without `sun.misc.Signal`: Spark's default stays
        logger.debug("the JVM keeps its SIGTERM handler: %s", e)


def connect_session(config: SparkSettings, *, app_name: str | None = None) -> SparkSession:
    """A Spark Connect session to `config.remote`, with `config.conf`'s `spark.sql.*`
    settings (the others are the server's to set when it starts)."""
    from pyspark.errors import PySparkException
    from pyspark.sql import SparkSession

    assert config.remote is not None
    builder = SparkSession.builder.remote(config.remote).appName(app_name or config.app_name)
    if local_cores(config.remote) is not None:
        # pyspark starts the server in this process: every setting is the server's to take
        conf = {**_local_server_conf(config.remote, config), **config.conf}
    else:
        conf = {k: v for k, v in config.conf.items() if k.startswith("spark.sql.")}
    for key, value in conf.items():
        builder = builder.config(key, value)
    logger.info("connecting to the Spark Connect server %s", config.remote)
    try:
        session = builder.getOrCreate()
        session.range(0).collect()  # the server answers, or the error says why not
    except (PySparkException, ImportError, OSError) as e:
        raise SessionStartError(
            f"no Spark Connect session at `{config.remote}` (`spark.remote`): "
            f"{root_cause_line(e).rstrip('.')}. Check that the server runs and listens "
            "there, and that the `connect` extra is installed "
            "(`pip install 'spark-warehouse[connect]'`: grpcio, grpcio-status, "
            "googleapis-common-protos, zstandard).",
            master=config.remote,
        ) from e
    return session


def local_connect_conf(master: str = "local[2]", *, native: bool = True) -> dict[str, str]:
    """Settings for the Spark Connect server `SparkSession.builder.remote("local[...]")`
    starts in this process, as the framework sets up its own local sessions; pass them
    with `.config(map=...)`.

    `native`: the cached native jars (`warehouse jars fetch`: Spark's Kafka connector,
    delta-spark) on the server's class path with Delta's SQL extension and catalog, so the
    native engines run there; without a cache, a warning and the Python engines only.

    pyspark launches that server from this process's environment, so this also sets, when
    they are unset: `PYSPARK_PYTHON` to this interpreter (the server's Python workers run
    the batches and must import the framework), and `SPARK_HOME` to the framework's
    launch home for local sessions (`warehouse.runtime.spark_home`: workers import the
    installed, compiled pyspark instead of compiling it from `pyspark.zip`; each
    streaming query starts a worker that must connect back within Spark's fixed 10 s).
    The server and its driver listen on 127.0.0.1."""
    if local_cores(master) is None:
        raise ValueError(f"`{master}` is no local master (`local`, `local[2]`, `local[*]`)")
    return _local_server_conf(master, SparkSettings(master=master, native_jars=native))


def _local_server_conf(master: str, config: SparkSettings) -> dict[str, str]:
    """`local_connect_conf` for `master`, with the jars cache and `native_jars` of
    `config`; sets the process's variables as that says."""
    cores = local_cores(master) or 1
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    home = launch_home(master, environ=os.environ)
    if home is not None:
        os.environ["SPARK_HOME"] = str(home)
    conf = {
        **storage.current().hadoop_conf(),
        **LOCAL_DEFAULTS,
        **local_conf(master),
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.sql.shuffle.partitions": str(cores),
        "spark.default.parallelism": str(cores),
    }
    jars = _native_jars_conf(config)
    if config.native_jars and not jars:
        logger.warning(
            "no native jars cached (`warehouse jars fetch` caches them): the local Spark "
            "Connect server has only the Python engines"
        )
    conf.update(jars)
    return _with_region_size(_with_log_config(conf), master)


@contextmanager
def _loopback(master: str) -> Iterator[None]:
    """SPARK_LOCAL_IP=127.0.0.1 while a local master's JVM is launched (it reads it once):
    a local session talks to itself only, so its driver, block manager and UI listen on
    127.0.0.1, not on the host's first interface, and Spark does not warn that the host
    name resolves to a loopback address. Restored after, so that a later session of this
    process for a cluster binds where the cluster can reach it. An address of your own
    wins."""
    if local_cores(master) is None or "SPARK_LOCAL_IP" in os.environ:
        yield
        return
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    try:
        yield
    finally:
        os.environ.pop("SPARK_LOCAL_IP", None)


LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
"""The driver's logging in a session the framework starts: Spark's defaults at WARN,
without the warnings every streaming run logs that ask nothing of the user."""


def _with_log_config(conf: dict[str, str]) -> dict[str, str]:
    """`conf` with `LOG_CONFIG` as the driver's log4j2 configuration, added to the
    driver's Java options, unless they name a configuration file of their own."""
    options = conf.get(DRIVER_OPTIONS, "")
    if "log4j2.configurationFile" in options or "log4j.configuration" in options:
        return conf
    return with_driver_options(conf, f"-Dlog4j2.configurationFile={LOG_CONFIG.as_uri()}")


def _start_failure(master: str, e: BaseException) -> SessionStartError:
    """What to tell a user whose session did not start: Java missing or unusable is the
    usual cause on a new machine (Spark's launcher then only says the gateway exited)."""
    cause = root_cause_line(e).rstrip(".")
    java_home = os.environ.get("JAVA_HOME")
    java = f"`JAVA_HOME` is `{java_home}`" if java_home else "`JAVA_HOME` is not set"
    return SessionStartError(
        f"Spark could not start a session (master `{master}`): {cause}. Spark needs "
        f"Java 17 or 21: install it and point `JAVA_HOME` at it ({java}); check "
        "`spark.master` and `spark.conf` in conf/<env>.yml. Spark's own output above "
        "says more.",
        master=master,
    )


CHECKPOINT_FILE_MANAGER = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)
"""Spark's checkpoint writer through Hadoop's `FileSystem` API (its default goes through
`FileContext`)."""


def local_conf(master: str) -> dict[str, str]:
    """Settings for a local master; a cluster keeps Spark's and Delta's defaults.

    - Delta rebuilds a table's snapshot (its log replayed into the list of live files) in
      `snapshotPartitions` tasks, 50 by default, sized for clusters and tables of millions
      of files; a streaming table's few files in 50 tasks on two local cores took 22.6 s
      per small append and read on a warm JVM, 5.8 s at 2 (docs/benchmarks.md, "Native
      engine: Delta snapshots on a local master"). Locally it gets one per core.
    - Without Hadoop's native library (pip's pyspark has none), Hadoop's local file system
      starts a process for some calls: a `readlink` for every status `FileContext` asks,
      two per rename, and a `chmod` for every file created. Spark's default checkpoint
      writer and Delta's log writer for `file:` paths rename through `FileContext`: of
      about 60 processes per micro-batch of the example warehouse, at about 4 ms of CPU
      each, 44 were `readlink`s (docs/decisions/0021). Spark's other
      checkpoint writer and Delta's `LocalLogStore` go through Hadoop's `FileSystem` API,
      whose rename is Java's. Their `chmod`s go when `warehouse jars fetch` has built the
      framework's local file system (`local_fs`, added by `get_session`). Where it has
      built the framework's log store, which extends `LocalLogStore` and lists a log
      reading the status of only the files it returns, `get_session` names that instead.
      On a local file system both ways check that the target is absent and then rename,
      so neither is safer than the other against two processes committing the same file
      at once.
    - A broadcast is serialized into blocks of `spark.broadcast.blockSize` (4 MB by
      default), the first allocated whole even for a task's few kilobytes; a local JVM
      has no other executor to send blocks to, and 1 MB blocks stay below G1's humongous
      size (`_with_region_size`).
    """
    cores = local_cores(master)
    if cores is None:
        return {}
    return {
        "spark.databricks.delta.snapshotPartitions": str(cores),
        "spark.sql.streaming.checkpointFileManagerClass": CHECKPOINT_FILE_MANAGER,
        "spark.delta.logStore.file.impl": "io.delta.storage.LocalLogStore",
        "spark.broadcast.blockSize": "1m",
    }


G1_REGION_SIZE = "4m"
"""The G1 region size of a local JVM the framework launches (`_with_region_size`)."""


def _with_region_size(conf: dict[str, str], master: str) -> dict[str, str]:
    """`conf` with G1 regions of `G1_REGION_SIZE` in the driver's Java options, for a
    local master whose options choose neither a region size nor another collector.

    G1 puts an object of half a region or more in regions of its own ("humongous"),
    and such allocations start its concurrent cycles early. With Spark's 1g heap its
    regions are 1 MB, and Spark allocates buffers of 1 MB for every task's result,
    every collected partition and every cached block, and of `spark.broadcast.blockSize`
    (4 MB by default) for every broadcast, which each stage and each file scan makes: in
    the example's continuous run on the native engines they started a quarter of the
    collections. With 4 MB regions and 1 MB broadcast blocks they started a fifth as
    many, and a third as many concurrent cycles ran with a 3g heap (docs/decisions/0024).
    """
    if local_cores(master) is None:
        return conf
    options = conf.get(DRIVER_OPTIONS, "")
    if "G1HeapRegionSize" in options or re.search(r"-XX:\+Use(?!G1GC)\w+GC\b", options):
        return conf
    return with_driver_options(conf, f"-XX:G1HeapRegionSize={G1_REGION_SIZE}")


Run = Literal["landing_once", "continuous"]
"""What a session the framework starts serves, for its JVM's compilation (`_with_jit`)."""

JIT_OPTIONS: dict[Run, str] = {
    "landing_once": "-XX:TieredStopAtLevel=1",
    "continuous": (
        "-XX:Tier4InvocationThreshold=50000 -XX:Tier4MinInvocationThreshold=6000 "
        "-XX:Tier4CompileThreshold=150000 -XX:Tier4BackEdgeThreshold=400000"
    ),
}
"""The JIT of a local JVM by what it serves: C1 alone for a run that ends on the landing
path; for queries that keep running, C2's optimizing compiles only of code ten times as
hot as Java's defaults ask."""

_JAVA_ENV = ("JDK_JAVA_OPTIONS", "JAVA_TOOL_OPTIONS")
"""Variables whose Java options every JVM of the process takes."""

_OWN_JIT = re.compile(
    r"-XX:[-+]?(TieredStopAtLevel|TieredCompilation|CompilationMode|Tier\d\w*Threshold)\b"
    r"|-Xint\b|-Xcomp\b"
)


def _with_jit(
    conf: dict[str, str], master: str, environ: Mapping[str, str], run: Run
) -> dict[str, str]:
    """`conf` with `JIT_OPTIONS[run]` in the driver's Java options, for a local master
    whose options (or `JDK_JAVA_OPTIONS`, `JAVA_TOOL_OPTIONS`) choose no compilation of
    their own.

    A JVM that starts, runs what a topic holds and exits spent half its CPU in the JIT's
    compilers, most of it in C2's optimizing compiles of start-up code the process runs
    a few times: a fresh `warehouse run --layer ods --once` used 9.1-11.1 s of JVM CPU,
    4.4-5.7 s of it compiling, against 4.4-6.4 s and 1.2-1.5 s with C1 alone, at 100,000
    records as at 3.1M (docs/decisions/0052). On the landing path the records do not
    pass through the JVM's code; where they do (Spark's own parse), C1's code took 3x
    the tasks' CPU per record, so such runs keep Java's tiers. Queries that keep running
    plan every micro-batch anew, and Spark's analyzer and optimizer, thousands of methods
    each called a few times a batch, still reach C2's thresholds minutes into a run: C2
    waits for ten times as many calls there (docs/decisions/0056)."""
    if local_cores(master) is None:
        return conf
    texts = (conf.get(DRIVER_OPTIONS, ""), *(environ.get(v, "") for v in _JAVA_ENV))
    if any(_OWN_JIT.search(text) for text in texts):
        return conf
    options = JIT_OPTIONS[run]
    logger.info("a `%s` session: the JVM compiles with %s", run, options)
    return with_driver_options(conf, options)


PERF_SAMPLING_OPTION = "-XX:PerfDataSamplingInterval=1000"
"""How often a continuous run's JVM samples its performance counters (`jstat` reads them)."""


def _with_perf_sampling(
    conf: dict[str, str], master: str, environ: Mapping[str, str]
) -> dict[str, str]:
    """`conf` with `PERF_SAMPLING_OPTION` in the driver's Java options, for a local master
    whose options (or the variables every JVM reads) say nothing of performance data.

    The JVM samples its counters every 50 ms by default, in a thread of its own: in an
    idle continuous run of the example's twelve queries that thread took 1.2 ms of CPU a
    second, a twentieth of all the run's idle CPU; once a second it took none measurable,
    and `jps`, `jstat` and `jcmd` still see the JVM (docs/decisions/0082)."""
    if local_cores(master) is None:
        return conf
    texts = (conf.get(DRIVER_OPTIONS, ""), *(environ.get(v, "") for v in _JAVA_ENV))
    if any("PerfData" in text for text in texts):
        return conf
    return with_driver_options(conf, PERF_SAMPLING_OPTION)


def _class_archive(conf: dict[str, str], master: str, home: Path | None) -> ClassArchive | None:
    """The class archive `warehouse jars fetch` made for this Java and Spark
    (`warehouse.runtime.class_archive`), for a local master; None when there is none or
    the Java options choose class-data sharing of their own."""
    if local_cores(master) is None:
        return None
    return launch_archive(conf, home, cache_dir=spark_cache_dir(os.environ), environ=os.environ)


def _launch_local(
    builder: SparkSession.Builder, conf: dict[str, str], archive: ClassArchive | None
) -> SparkSession:
    """Launch a local session's JVM, mapping `archive` when there is one.

    An archive damaged after it was made (a bad disk block, a copy cut short and padded)
    keeps its recorded size, maps, and crashes the JVM when it first loads a class
    through it, before the JVM gives Python its port: pyspark's JAVA_GATEWAY_EXITED.
    Then the JVM is launched again without the archive; when that one starts, the
    archive was the cause and is removed, with a warning (`warehouse jars fetch` makes a
    new one). When it does not start either, its failure is the session's own."""
    from pyspark.errors import PySparkRuntimeError

    if archive is None:
        return builder.getOrCreate()
    logger.debug("launching Spark with the class archive %s", archive.path)
    mapped = with_driver_options(conf, archive_options(archive))
    builder.config(DRIVER_OPTIONS, mapped[DRIVER_OPTIONS])
    try:
        return builder.getOrCreate()
    except PySparkRuntimeError as e:
        if e.getCondition() != "JAVA_GATEWAY_EXITED":
            raise
    builder.config(DRIVER_OPTIONS, conf.get(DRIVER_OPTIONS, ""))
    session = builder.getOrCreate()
    discard(archive)
    logger.warning(
        "Java crashed at start with the class archive %s (Java's report above), and "
        "started without it: the archive is damaged and was removed. `warehouse jars "
        "fetch` makes a new one (about 45 s), which makes sessions start faster.",
        archive.path,
    )
    return session


def local_cores(master: str) -> int | None:
    """The cores a local master runs tasks on (`local`: 1, `local[4]`: 4, `local[*]`: the
    machine's), or None for any other master."""
    if not master.startswith("local"):
        return None
    threads = (
        master[master.find("[") + 1 : master.find("]")].split(",")[0] if "[" in master else "1"
    )
    cores = (os.cpu_count() or 2) if threads == "*" else int(threads)
    return max(1, cores)


def _native_jars_conf(config: SparkSettings) -> dict[str, str]:
    """`spark.jars` (and Delta's extension) for the cached native jars, unless turned off
    or the environment names its own jars or packages."""
    if not config.native_jars or {"spark.jars", "spark.jars.packages"} & set(config.conf):
        return {}
    cache = Path(config.jars_cache) if config.jars_cache else default_cache_dir()
    jars = cached_jars(cache)
    if jars is None:
        logger.info(
            "no native jars cached in %s (`warehouse jars fetch` caches them)"
            "; this session has only the Python engines",
            cache,
        )
        return {}
    return jars.spark_conf()


def _storage_conf(config: SparkSettings, conf: dict[str, str], *, jars: bool) -> dict[str, str]:
    """Hadoop's settings for object storage (`streams.storage`: the endpoint, region and
    addressing of the standard variables and the project's `storage:` section, `s3://`
    as `s3a://`), and with `jars` the cached `hadoop-aws` with its AWS SDK on the class
    path after the native jars, unless the environment names jars or packages of its
    own. Settings in `spark.conf` win. The SDK bundle (about 700 MB) stays off sessions
    that use local paths only."""
    out = storage.current().hadoop_conf()
    if not jars or {"spark.jars", "spark.jars.packages"} & set(config.conf):
        return out
    cache = Path(config.jars_cache) if config.jars_cache else default_cache_dir()
    files = cached_storage_jars(cache)
    if files is None:
        logger.info(
            "no object-storage jars cached in %s (`warehouse jars fetch` caches them): "
            "this session reads and writes local paths only",
            cache,
        )
        return out
    jars = [j for j in conf.get("spark.jars", "").split(",") if j]
    out["spark.jars"] = ",".join([*jars, *(str(f) for f in files)])
    return out


def _submitted() -> bool:
    """True when a launcher (`spark-submit`) started the JVM and set the master itself."""
    return "PYSPARK_GATEWAY_PORT" in os.environ
