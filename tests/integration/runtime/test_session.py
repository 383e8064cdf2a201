"""The session factory reuses the running session; engine resolution on this JVM."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from warehouse.runtime.engines import native_available, resolve_engine
from warehouse.runtime.errors import RuntimeConfigError
from warehouse.runtime.session import CHECKPOINT_FILE_MANAGER, get_session
from warehouse.spec.config import SparkSettings

pytestmark = pytest.mark.spark


def test_get_session_returns_the_active_session_and_never_a_second(spark) -> None:
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    got = get_session(SparkSettings(master="local[1]", conf={"spark.sql.shuffle.partitions": "7"}))
    assert got is spark
    assert SparkContext._active_spark_context is context
    # The caller's configuration is left alone.
    assert got.conf.get("spark.sql.shuffle.partitions") == "2"


def test_local_defaults_reach_the_launched_jvm(spark) -> None:
    """`LOCAL_DEFAULTS` hold static confs (read once, when the JVM starts): they must be
    in the launched session, not set on it afterwards."""
    from warehouse.runtime.session import LOCAL_DEFAULTS

    jconf = spark.sparkContext._jsc.sc().conf()
    for key in ("spark.sql.codegen.cache.maxEntries", "spark.sql.session.timeZone"):
        assert jconf.get(key) == LOCAL_DEFAULTS[key]
    assert spark.conf.get("spark.sql.codegen.cache.maxEntries") == "1000"
    # local[2]: Delta rebuilds snapshots in one task per core, not its cluster default of 50.
    assert spark.conf.get("spark.databricks.delta.snapshotPartitions") == "2"
    assert spark.conf.get("spark.sql.streaming.checkpointFileManagerClass") == (
        CHECKPOINT_FILE_MANAGER
    )
    # Delta reads its log store from the JVM's conf, once: the framework's, which extends
    # Delta's `LocalLogStore` (tests/integration/runtime/test_local_fs.py).
    assert jconf.get("spark.delta.logStore.file.impl") == "warehouse.delta.LocalListingLogStore"
    # Spark's 1 MB buffers and broadcast blocks stay below half a G1 region (humongous).
    assert jconf.get("spark.broadcast.blockSize") == "1m"
    assert _vm_option(spark, "G1HeapRegionSize") == str(4 * 1024 * 1024)


def test_py4j_converts_numpy_as_pyspark_does_without_importing_its_test_helpers(spark) -> None:
    """A session `get_session` starts converts NumPy arrays and scalars for the JVM as
    pyspark's own converters do, through converters that never import `pyspark.testing`
    (pandas and a dozen package look-ups at every process's first call to the JVM,
    `warehouse.runtime.numpy_converters`)."""
    import numpy as np
    from py4j import protocol
    from pyspark.sql.types import NumpyArrayConverter, NumpyScalarConverter

    kinds = [type(c) for c in protocol.INPUT_CONVERTER]
    assert NumpyArrayConverter not in kinds and NumpyScalarConverter not in kinds
    assert sum(issubclass(k, (NumpyArrayConverter, NumpyScalarConverter)) for k in kinds) == 2
    jvm = spark.sparkContext._jvm
    assert jvm.java.util.Arrays.toString(np.array([1, 2, 3], dtype=np.int64)) == "[1, 2, 3]"
    assert jvm.java.lang.String.valueOf(np.float64(2.5)) == "2.5"


def _vm_option(spark, name: str) -> str:
    """The launched JVM's value of the HotSpot option `name`."""
    jvm = spark.sparkContext._jvm
    bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
        jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean")
    )
    return bean.getVMOption(name).getValue()


def test_the_launched_jvm_maps_the_class_archive(spark) -> None:
    """`make install` (`warehouse jars fetch`) made a class archive for this Java and
    Spark; the JVM the framework launched was given it and mapped it (a JVM that refused
    it, its class path changed, would have started without it, silently)."""
    from warehouse.runtime.class_archive import cached_archive, session_launch
    from warehouse.runtime.spark_home import default_cache_dir

    launch = session_launch(os.environ)
    assert launch is not None
    archive = cached_archive(default_cache_dir(os.environ), launch)
    assert archive is not None, (
        "no class archive for this Java and Spark: `make install` (`warehouse jars fetch`) makes it"
    )
    assert _vm_option(spark, "SharedArchiveFile") == str(archive.path)
    pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    assert str(archive.path) in Path(f"/proc/{pid}/maps").read_text()


def test_the_class_archive_was_made_by_delta_and_kafka_work(spark) -> None:
    """The archive's child ran Delta and loaded the Kafka source wherever the session has
    their jars, as this one does: an archive without their classes leaves most of a
    session's first work to load them from the jars."""
    from streams.delta.native import native_delta_available
    from streams.kafka.stream import native_kafka_available
    from warehouse.runtime.class_archive import session_archive

    _cache, archive = session_archive(os.environ)
    assert archive is not None, "no class archive: `make install` makes it"
    assert native_delta_available(spark) and native_kafka_available(spark)
    assert archive.record.get("exercised") == ["sql", "delta", "kafka"]


def test_a_torn_class_archive_is_caught_before_it_is_kept(tmp_path: Path) -> None:
    """A JVM that maps a torn archive crashes at start; `make_archive` keeps an archive
    only after a `java -version` has mapped it whole."""
    from warehouse.runtime.class_archive import maps_whole, session_archive

    _cache, archive = session_archive(os.environ)
    assert archive is not None, "no class archive: `make install` makes it"
    java = Path(str(archive.record["java"]))
    assert maps_whole(java, archive.path)
    torn = tmp_path / "torn.jsa"
    with archive.path.open("rb") as whole:
        torn.write_bytes(whole.read(1 << 20))
    assert not maps_whole(java, torn)


_DAMAGED_ARCHIVE_SCRIPT = """
import logging
from warehouse.runtime.session import get_session
from warehouse.spec.config import SparkSettings

logging.basicConfig(level=logging.WARNING)
spark = get_session(SparkSettings(master="local[1]", conf={}), app_name="damaged-archive")
print("sum", spark.range(10).selectExpr("sum(id)").first()[0])
runtime = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
print("java options", " ".join(str(a) for a in runtime.getInputArguments()))
spark.stop()
"""


def test_a_class_archive_damaged_in_place_is_removed_and_the_session_starts_without_it(
    tmp_path: Path,
) -> None:
    """An archive whose bytes changed after it was made keeps its recorded size and maps,
    and crashes the JVM once it loads a class through it (here its last 8 KB zeroed,
    Java's shared symbol table): the session starts again without it and works, and the
    archive and its record are removed with a warning that names it."""
    import json
    import shutil
    import subprocess
    import sys

    from warehouse.runtime.class_archive import (
        archive_dir,
        launch_for,
        session_archive,
        session_class_path,
    )
    from warehouse.runtime.spark_home import default_cache_dir

    _cache, archive = session_archive(os.environ)
    assert archive is not None, "no class archive: `make install` makes it"
    # The launch the archive was made for, with the framework's cache in tmp_path.
    env = {
        **os.environ,
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "SPARK_HOME": str(archive.record["spark_home"]),
    }
    launch = launch_for(None, env, class_path=session_class_path())
    assert launch is not None
    folder = archive_dir(default_cache_dir(env))
    folder.mkdir(parents=True)
    damaged = folder / f"{launch.key}.jsa"
    shutil.copyfile(archive.path, damaged)
    with damaged.open("r+b") as f:
        f.seek(archive.size - 8192)
        f.write(bytes(8192))
    damaged.with_suffix(".json").write_text(json.dumps(dict(archive.record)))

    done = subprocess.run(
        [sys.executable, "-c", _DAMAGED_ARCHIVE_SCRIPT],
        cwd=tmp_path,  # where Java writes its crash report
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "sum 45" in done.stdout.splitlines()
    assert "SIGSEGV" in done.stdout  # Java's own report of the crash
    [options] = [x for x in done.stdout.splitlines() if x.startswith("java options ")]
    assert "SharedArchiveFile" not in options
    assert f"class archive {damaged}" in done.stderr
    assert "damaged and was removed" in done.stderr
    assert sorted(folder.iterdir()) == []


def test_java_options_of_your_own_choose_the_collector() -> None:
    """A region size or another collector in the driver's Java options is left as it is;
    a cluster's master gets no region size from the framework."""
    from warehouse.runtime.session import _with_region_size

    options = "spark.driver.extraJavaOptions"
    for own in ("-XX:G1HeapRegionSize=16m", "-XX:+UseParallelGC -Xmx8g", "-XX:+UseZGC"):
        assert _with_region_size({options: own}, "local[2]") == {options: own}
    assert _with_region_size({options: "-XX:+UseG1GC"}, "local[*]") == {
        options: "-XX:+UseG1GC -XX:G1HeapRegionSize=4m"
    }
    assert _with_region_size({}, "local") == {options: "-XX:G1HeapRegionSize=4m"}
    assert _with_region_size({}, "spark://head:7077") == {}


def test_a_sessions_jit_follows_what_it_serves_unless_java_options_choose() -> None:
    """A local session that serves one run and ends gets the JIT's C1 alone, one that keeps
    running C2 for its hottest code only; a compilation choice in the driver's Java options
    or in the variables every JVM reads is kept, and a cluster's master gets nothing."""
    from warehouse.runtime.session import JIT_OPTIONS, _with_jit

    options = "spark.driver.extraJavaOptions"
    c1 = "-XX:TieredStopAtLevel=1"
    hot = JIT_OPTIONS["continuous"]
    assert "-XX:Tier4InvocationThreshold=50000" in hot.split()
    assert _with_jit({}, "local[2]", {}, "landing_once") == {options: c1}
    assert _with_jit({}, "local[2]", {}, "continuous") == {options: hot}
    assert _with_jit({options: "-Xmx2g"}, "local[*]", {}, "landing_once") == {
        options: f"-Xmx2g {c1}"
    }
    for own in (
        "-XX:TieredStopAtLevel=4",
        "-Xmx2g -XX:-TieredCompilation",
        "-XX:CompilationMode=high-only",
        "-XX:Tier4InvocationThreshold=5000",
        "-XX:Tier3CompileThreshold=2000",
        "-Xint",
    ):
        for run in ("landing_once", "continuous"):
            assert _with_jit({options: own}, "local[2]", {}, run) == {options: own}
    for variable in ("JDK_JAVA_OPTIONS", "JAVA_TOOL_OPTIONS"):
        assert _with_jit({}, "local[2]", {variable: "-XX:TieredStopAtLevel=4"}, "continuous") == {}
    serial = {"JDK_JAVA_OPTIONS": "-XX:+UseSerialGC"}
    assert _with_jit({}, "local[2]", serial, "landing_once") == {options: c1}
    assert _with_jit({}, "spark://head:7077", {}, "continuous") == {}


def test_a_continuous_sessions_jvm_samples_its_counters_once_a_second() -> None:
    """A local JVM that keeps running samples its performance counters once a second, not
    every 50 ms, unless the driver's Java options or the variables every JVM reads say
    something of performance data; a cluster's master gets nothing."""
    from warehouse.runtime.session import _with_perf_sampling

    options = "spark.driver.extraJavaOptions"
    every_second = "-XX:PerfDataSamplingInterval=1000"
    assert _with_perf_sampling({}, "local[2]", {}) == {options: every_second}
    assert _with_perf_sampling({options: "-Xmx2g"}, "local[*]", {}) == {
        options: f"-Xmx2g {every_second}"
    }
    for own in ("-XX:-UsePerfData", "-XX:PerfDataSamplingInterval=20"):
        assert _with_perf_sampling({options: own}, "local[2]", {}) == {options: own}
        assert _with_perf_sampling({}, "local[2]", {"JAVA_TOOL_OPTIONS": own}) == {}
    assert _with_perf_sampling({}, "spark://head:7077", {}) == {}


def _printing_its_flags(bootstrap: str, unique: str, tmp_path: Path) -> tuple[Path, dict]:
    """A python-engine orders project whose JVM prints its flags as it starts
    (`-XX:+PrintFlagsFinal`, Java options that choose no compilation), and the environment
    to run it in: the suite's own C1 choice (`JDK_JAVA_OPTIONS`, tests/conftest.py) left
    out."""
    from tests.integration.runtime.helpers import orders_project

    _topic, proj = orders_project(
        tmp_path / "proj",
        bootstrap,
        unique,
        engine="python",
        extra_conf='    spark.driver.extraJavaOptions: "-XX:+PrintFlagsFinal"\n',
    )
    own = os.environ["JDK_JAVA_OPTIONS"].replace("-XX:TieredStopAtLevel=1", "")
    return proj, {**os.environ, "JDK_JAVA_OPTIONS": own}


@pytest.mark.kafka
def test_run_once_launches_its_jvm_with_c1_only(broker, unique, tmp_path: Path) -> None:
    """`warehouse run --layer ods --once` of a Kafka JSON table, whose records take the
    Arrow landing path, starts a JVM that compiles with C1 alone (it runs what the topic
    holds and exits); the JVM prints its flags (`_printing_its_flags`)."""
    import re
    import subprocess
    import sys

    proj, env = _printing_its_flags(broker.bootstrap, unique, tmp_path)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "warehouse",
            "--project",
            str(proj),
            "run",
            "--layer",
            "ods",
            "--once",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    levels = re.findall(r"\bTieredStopAtLevel\s+=\s+(\d+)", done.stdout)
    assert levels == ["1"], done.stdout[-3000:]
    assert "done: 1 table(s), 0 rows written" in done.stdout


@pytest.mark.kafka
def test_a_continuous_run_launches_its_jvm_saving_c2_for_its_hottest_code(
    broker, unique, tmp_path: Path
) -> None:
    """`warehouse run --layer ods`, which keeps running, starts a JVM whose C2 waits for ten
    times the calls Java's defaults ask and that samples its counters once a second; the
    JVM prints its flags (`_printing_its_flags`).
    Stopped by SIGTERM, it exits 0."""
    import re
    import subprocess
    import sys

    proj, env = _printing_its_flags(broker.bootstrap, unique, tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "warehouse", "--project", str(proj), "run", "--layer", "ods"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**env, "PYTHONUNBUFFERED": "1"},
    )
    flags: dict[str, str] = {}
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # the JVM prints every flag as it starts
            found = re.search(
                r"\b(Tier4\w+Threshold|TieredStopAtLevel|PerfDataSamplingInterval)\s+=\s+(\d+)",
                line,
            )
            if found:
                flags[found[1]] = found[2]
            if "started (continuous" in line:
                break
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert flags == {
        "Tier4BackEdgeThreshold": "400000",
        "Tier4CompileThreshold": "150000",
        "Tier4InvocationThreshold": "50000",
        "Tier4MinInvocationThreshold": "6000",
        "TieredStopAtLevel": "4",
        "PerfDataSamplingInterval": "1000",
    }, flags
    assert proc.returncode == 0, rest[-3000:]
    assert "stopped: ods_orders [ods]" in rest


def test_streaming_checkpoints_and_delta_commits_rename_without_a_process(
    spark, native_jars, tmp_path
) -> None:
    """On a local master a micro-batch writes and renames its offsets, its state, its
    commit and its Delta commit into place without Hadoop starting a `readlink` process
    for each rename (`warehouse.runtime.session.local_conf`) or a `chmod` for each file
    (the framework's local file system, `warehouse.runtime.local_fs`). The JVM's own
    flight recorder lists every process it starts; one started on purpose shows that it
    does."""
    jvm = spark._jvm
    source = tmp_path / "source"
    spark.range(30).selectExpr("id % 3 AS k").write.parquet(str(source))
    recording = jvm.jdk.jfr.Recording()
    recording.enable("jdk.ProcessStart")
    recording.start()
    try:
        query = (
            spark.readStream.schema("k long")
            .option("maxFilesPerTrigger", 1)
            .parquet(str(source))
            .groupBy("k")
            .count()
            .writeStream.format("delta")
            .outputMode("complete")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start(str(tmp_path / "table"))
        )
        assert query.awaitTermination(120)
        marker = jvm.java.lang.ProcessBuilder(["true"]).start()
        marker.waitFor()
    finally:
        recording.stop()
    dump = jvm.java.io.File(str(tmp_path / "processes.jfr")).toPath()
    recording.dump(dump)
    recording.close()
    events = jvm.jdk.jfr.consumer.RecordingFile.readAllEvents(dump)
    started = [e.getString("command") for e in events]
    assert query.lastProgress["batchId"] >= 1, "the query should have run several batches"
    assert "true" in started, "the recording should list the processes the JVM starts"
    assert [c for c in started if c.split()[0] in ("readlink", "chmod")] == []
    counts = spark.read.format("delta").load(str(tmp_path / "table")).orderBy("k").collect()
    assert [(r.k, r["count"]) for r in counts] == [(0, 10), (1, 10), (2, 10)]


def test_auto_resolves_to_native_where_the_jars_are_and_says_how_to_get_them(
    spark, native_jars, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from warehouse.runtime import engines

    # The test session carries the jars `make install` cached, as the CLI's sessions do.
    # The choice is logged once per session: forget what earlier tests had logged.
    monkeypatch.setattr(engines, "_logged", set())
    caplog.set_level("INFO", logger="warehouse.runtime.engines")
    assert resolve_engine(spark, "kafka", "auto") == "native"
    assert resolve_engine(spark, "delta", "auto") == "native"
    assert resolve_engine(spark, "kafka", "python") == "python"
    assert "kafka engine: native (`auto`: org.apache.spark.sql.kafka010" in caplog.text
    saved = dict(engines.NATIVE_CLASSES)
    try:  # a class this JVM lacks: auto falls back, native asked for says which jar
        engines.NATIVE_CLASSES["delta"] = "io.delta.tables.NoSuchClass"
        assert resolve_engine(spark, "delta", "auto") == "python"
        with pytest.raises(RuntimeConfigError, match=r"io\.delta:delta-spark_4\.2_2\.13") as e:
            resolve_engine(spark, "delta", "native")
        assert "make install" in str(e.value)
    finally:
        engines.NATIVE_CLASSES.clear()
        engines.NATIVE_CLASSES.update(saved)


def test_native_probe_sees_classes_that_are_on_the_class_path(spark) -> None:
    # The probe itself must be able to answer yes: a Spark class is always there.
    from warehouse.runtime import engines

    saved = dict(engines.NATIVE_CLASSES)
    try:
        engines.NATIVE_CLASSES["kafka"] = "org.apache.spark.sql.SparkSession"
        assert native_available(spark, "kafka") is True
        assert resolve_engine(spark, "kafka", "native") == "native"
    finally:
        engines.NATIVE_CLASSES.clear()
        engines.NATIVE_CLASSES.update(saved)


def test_python_workers_import_the_installed_pyspark_not_the_source_zip(spark) -> None:
    # The session fixture is launched as the CLI launches its own (spark_home.launching):
    # a worker importing pyspark from python/lib/pyspark.zip compiles it from source, a
    # second per worker, paid again by every streaming query's Python source.
    from warehouse.runtime.spark_home import installed_home

    if installed_home() is None:
        pytest.skip("pyspark is not pip-installed here: Spark's own python/ folder is used")
    files = spark.range(2).rdd.map(lambda _: __import__("pyspark").__file__).collect()
    assert files and all(".zip" not in f for f in files), files


_LOGGING_SCRIPT = """
import os, sys, time
from warehouse.runtime.session import get_session
from warehouse.spec.config import SparkSettings

checkpoint, java_options = sys.argv[1], sys.argv[2]
conf = {"spark.sql.shuffle.partitions": "2"}
if java_options:
    conf["spark.driver.extraJavaOptions"] = java_options
spark = get_session(SparkSettings(master="local[1]", conf=conf, native_jars=False))
for _ in range(2):  # the second start reads the query's state back from its checkpoint
    query = (
        spark.readStream.format("rate").option("rowsPerSecond", 10).load()
        .groupBy().count()
        .writeStream.outputMode("complete").format("noop")
        .option("checkpointLocation", checkpoint).start()
    )
    deadline = time.monotonic() + 120
    while len(query.recentProgress) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)  # two batches
    query.stop()
logger = spark._jvm.org.slf4j.LoggerFactory.getLogger("org.apache.spark.scheduler.DAGScheduler")
logger.warn("a warning worth reading")
print("driver host", spark.conf.get("spark.driver.host"), os.environ.get("SPARK_LOCAL_IP"))
spark.stop()
"""

_QUIETED = (
    "spark.sql.adaptive.enabled is not supported in streaming",
    "Disabling AQE since AQE is not supported in stateful workloads",
    "doesn't exist in loadedMaps",
    "Failed to cancel job group",
    "Unable to load native-hadoop library",
    "resolves to a loopback address",
    "Using Spark's default log4j profile",
)


def _stateful_run(tmp_path, java_options: str = "") -> tuple[str, str]:
    """(stdout, stderr) of `_LOGGING_SCRIPT` in a process of its own, without a
    SPARK_LOCAL_IP of the test run's."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "SPARK_LOCAL_IP"}
    done = subprocess.run(
        [sys.executable, "-c", _LOGGING_SCRIPT, str(tmp_path / "checkpoint"), java_options],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout, done.stderr


def test_a_session_the_framework_starts_logs_no_warning_that_asks_nothing(tmp_path) -> None:
    """A stateful query started twice and stopped: Spark's warnings that every streaming
    run logs (adaptive execution off in streaming, state read back at a restart, no job
    to cancel at a stop, no native Hadoop) are dropped by their message; a warning of
    the same logger with another message still shows."""
    stdout, stderr = _stateful_run(tmp_path)

    assert "a warning worth reading" in stderr
    assert [m for m in _QUIETED if m in stderr] == []
    # The local JVM listens on loopback (not the host's first interface); the variable
    # was set for its launch only.
    [line] = [x for x in stdout.splitlines() if x.startswith("driver host ")]
    host, variable = line.split()[2:]
    assert host in ("127.0.0.1", "localhost") and variable == "None"


def test_a_log_configuration_of_your_own_replaces_the_frameworks(tmp_path) -> None:
    """Named in `spark.driver.extraJavaOptions`, a user's own log4j2 configuration is the
    one used: with nothing dropped, the same run logs Spark's warnings."""
    own = tmp_path / "log4j2.properties"
    own.write_text(
        "rootLogger.level = warn\n"
        "rootLogger.appenderRef.stderr.ref = console\n"
        "appender.console.type = Console\n"
        "appender.console.name = console\n"
        "appender.console.target = SYSTEM_ERR\n"
        "appender.console.layout.type = PatternLayout\n"
        "appender.console.layout.pattern = %p %c{1}: %m%n\n"
    )
    _, stderr = _stateful_run(tmp_path, f"-Dlog4j2.configurationFile={own.as_uri()}")

    assert "a warning worth reading" in stderr
    for message in _QUIETED[:3]:
        assert message in stderr


def test_local_connect_conf_sets_up_the_server_pyspark_starts_here(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """What `remote("local[3]")` is given: the framework's local settings for 3 cores, on
    127.0.0.1, the native jars when asked; and the process's variables pyspark launches
    the server from: workers on this interpreter, the launch home (own ones win)."""
    import sys

    from warehouse import local_connect_conf
    from warehouse.runtime.spark_home import launch_home

    for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME"):
        monkeypatch.delenv(name, raising=False)

    conf = local_connect_conf("local[3]", native=False)

    assert os.environ["PYSPARK_PYTHON"] == os.environ["PYSPARK_DRIVER_PYTHON"] == sys.executable
    assert os.environ["SPARK_HOME"] == str(
        launch_home("local[3]", environ={"PYSPARK_PYTHON": sys.executable})
    )
    assert not (Path(os.environ["SPARK_HOME"]) / "python" / "lib" / "pyspark.zip").exists()
    assert conf["spark.databricks.delta.snapshotPartitions"] == "3"
    assert conf["spark.sql.shuffle.partitions"] == conf["spark.default.parallelism"] == "3"
    for key in ("spark.connect.grpc.binding.address", "spark.driver.bindAddress"):
        assert conf[key] == "127.0.0.1"
    assert "spark.jars" not in conf
    assert "io.delta" in local_connect_conf("local[3]")["spark.jars"]

    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/other/python3")
    monkeypatch.setenv("SPARK_HOME", str(tmp_path))
    local_connect_conf("local[3]", native=False)
    assert os.environ["PYSPARK_PYTHON"] == "/opt/other/python3"
    assert os.environ["SPARK_HOME"] == str(tmp_path)
    with pytest.raises(ValueError, match="sc://host:15002"):
        local_connect_conf("sc://host:15002")
