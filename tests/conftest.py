"""Shared fixtures: one real Spark session per test run, real broker processes.

No mocks of Kafka, Spark or Delta: the `spark` fixture is a real local session,
`broker` is a real `streams.broker` process on 127.0.0.1, tables are real Delta
tables under `tmp_path`.
"""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.scratch import make_scratch, remove_dead_runs

# Python workers must run the interpreter that runs the tests (the venv's).
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
# Every JVM the tests start is short-lived with tiny data: the session's, the CLI and demo
# subprocesses', each crash-child life's, the standalone cluster's daemons and executors.
# The suite is CPU-bound on 2 cores, and C2's warm-up compiles and G1's threads cost more
# than they return there: C1 alone and the serial collector took 14% off the wall time of
# a crash-child life and of the Kafka + CLI tests. C1 alone reserves 48 MB for compiled
# code where Java's tiers reserve 240 MB, and the Spark Connect server of the runtime
# tests, which serves every Connect test's queries, filled 48 MB in 43 s and then failed
# a batch ("Out of space in CodeCache for adapters"): the tiers' reserve is kept (address
# space; the JVM commits what it fills). The `java` launcher reads this variable (JDK 9+)
# and notes it on stderr; a value set by the caller wins.
# Their temporary files (Spark's local dirs, block managers and artifacts, the native
# libraries snappy and lz4 unpack) go to a directory of this run, removed when it ends:
# a JVM killed by a crash test never deletes its own, and /tmp kept gigabytes of them. A
# run that was killed itself leaves its directory; the next run removes it.
remove_dead_runs()
_JVM_TMP = str(make_scratch("jvm"))
os.environ.setdefault(
    "JDK_JAVA_OPTIONS",
    f"-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m -XX:+UseSerialGC"
    f" -Djava.io.tmpdir={_JVM_TMP}",
)

REPO_ROOT = Path(__file__).resolve().parent.parent

# The S3 server of the object-storage tests, planned before any JVM starts: the standard
# AWS variables that reach it are set in this process now, so that the shared session's
# JVM and its Python workers inherit them as a user's would (tests/support/s3.py). It is
# started by the first test that asks for it.
from tests.support.s3 import S3Server, plan  # noqa: E402

S3 = plan()


def pytest_unconfigure(config: pytest.Config) -> None:
    S3.stop()
    shutil.rmtree(S3.folder, ignore_errors=True)
    shutil.rmtree(_JVM_TMP, ignore_errors=True)


@pytest.fixture(scope="session")
def s3() -> S3Server:
    """The S3-API server (S3Proxy) of the run, started on first use; the test process's
    AWS variables point at it."""
    return S3.start()


@pytest.fixture
def s3_root(s3: S3Server, unique: Callable[[str], str]) -> str:
    """A warehouse root in a new bucket of the S3 server: `s3a://<bucket>/wh`."""
    return f"s3a://{s3.create_bucket(unique('wh'))}/wh"


@pytest.fixture(params=["local", "s3"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a storage test's tables go: `tmp_path`, or a new bucket of the S3 server
    (`s3a://<bucket>/wh`): the tests about storage run on both."""
    if request.param == "s3":
        return request.getfixturevalue("s3_root")
    return str(tmp_path)


# Apache Kafka, the oracle of tests/integration/oracle: `apache_kafka`, `apache_kafka_cluster`;
# the Java client's compiled scenarios: `java_client`; Kafka Connect workers:
# `connect_workers`; a PostgreSQL server with logical decoding per module: `postgres`.
pytest_plugins = [
    "tests.support.apache_kafka",
    "tests.support.java_client",
    "tests.support.kafka_connect",
    "tests.support.postgres",
]


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory):
    """The one local SparkSession of the test run; never stop or reconfigure it per test."""
    from warehouse.runtime.session import get_session
    from warehouse.spec.config import SparkSettings

    warehouse_dir = tmp_path_factory.mktemp("spark-warehouse")
    # Launched as the CLI launches its sessions: its local defaults (UI off, UTC, polling
    # delay) and Python workers importing compiled pyspark (warehouse.runtime.spark_home).
    conf = {
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.sql.warehouse.dir": str(warehouse_dir),
        "spark.sql.streaming.stopTimeout": "30s",
        "spark.driver.extraJavaOptions": "-Dderby.system.home=" + str(warehouse_dir),
        "warehouse.logLevel": "WARN",
    }
    # One session for the tests on local paths and on S3: it carries the object-storage
    # jars, and Hadoop's settings for the S3 server `plan` chose.
    session = get_session(
        SparkSettings(master="local[2]", conf=conf), app_name="warehouse-tests", object_storage=True
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The one Spark Connect server of the test run (tests/support/connect.py), with the
    native engines' jars on its class path: the Connect tests of both engines share it."""
    from tests.support.connect import ConnectServer
    from warehouse.runtime.jars import cached_jars, default_cache_dir

    jars = cached_jars(default_cache_dir())
    if jars is None or not (jars.kafka and jars.delta):
        pytest.fail("the native engines' jars are not cached: run `make install`", pytrace=False)
    server = ConnectServer(tmp_path_factory.mktemp("connect"), conf=jars.spark_conf()).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def connect_spark(connect_server) -> Iterator[object]:
    """A Spark Connect session to `connect_server`, as a notebook on serverless holds one.

    Built by pyspark's Connect builder, which leaves the process's mode alone: the classic
    `spark` fixture's tests in the same run keep building classic columns. A test using
    this session asks for `connect_mode` (or `session`) to be in Connect mode."""
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    session = RemoteSparkSession.builder.remote(connect_server.url).create()
    yield session
    session.stop()


@pytest.fixture
def connect_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process in Spark Connect mode for the test, as a user's Connect-only process is
    (`pyspark.sql.functions` then build Connect columns)."""
    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")


@pytest.fixture(params=["classic", "connect"])
def session(request: pytest.FixtureRequest):
    """The test's SparkSession: the shared classic `spark`, or `connect_spark` (with the
    process in Connect mode)."""
    if request.param == "classic":
        return request.getfixturevalue("spark")
    request.getfixturevalue("connect_mode")
    return request.getfixturevalue("connect_spark")


ENGINES = ("python", "native")
"""The two engines every table-running test runs on: `python` (the pip-only data sources,
delta-rs) and `native` (Spark's `kafka` format, delta-spark)."""


@pytest.fixture
def native_jars() -> None:
    """Fails the test when the native engines' jars are not cached: `make install` caches
    them, sessions started by the framework (the `spark` fixture's too) carry them, and a
    test that skipped instead would pass without testing anything."""
    from warehouse.runtime.jars import cached_jars, default_cache_dir, installed_packages

    jars = cached_jars(default_cache_dir())
    if jars is None or not (jars.kafka and jars.delta):
        pytest.fail(
            "the native engines' jars are not cached: "
            + ", ".join(f"`{c}`" for c in installed_packages().coordinates)
            + ". Run `make install` (it resolves them from Maven Central into "
            f"{default_cache_dir()}).",
            pytrace=False,
        )


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    """The engine of this run of the test, `python` or `native` (whose jars must be there)."""
    if request.param == "native":
        request.getfixturevalue("native_jars")
    return request.param


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One real broker process shared by the run; tests use unique topic and group names."""
    from streams.broker.launcher import BrokerProcess

    proc = BrokerProcess(tmp_path_factory.mktemp("broker-data")).start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[Callable[..., object]]:
    """Start fresh broker processes (own data dir, own config); all are stopped at teardown."""
    from streams.broker.launcher import BrokerProcess

    started: list[BrokerProcess] = []

    def start(data_dir: Path | None = None, **config: object) -> BrokerProcess:
        d = data_dir or tmp_path / f"broker-{len(started)}"
        proc = BrokerProcess(d, config={k: v for k, v in config.items()}).start()
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()


@pytest.fixture
def unique() -> Callable[[str], str]:
    """Unique names for topics, groups and tables: `unique("orders")` -> `orders-1a2b3c4d`."""
    return lambda prefix: f"{prefix}-{uuid.uuid4().hex[:8]}"
