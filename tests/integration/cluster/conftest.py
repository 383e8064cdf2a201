"""The cluster tests' shared parts: the environment archive of `warehouse bundle`, and
the cluster shape's standalone cluster and three Kafka nodes, each started once for the
test process (every test of this folder that runs applications runs on the same ones)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.cluster.class_archives import ClusterArchives, make_archives
from tests.integration.cluster.standalone import StandaloneCluster
from tests.support.apache_kafka import ApacheKafka, started_nodes


@pytest.fixture(scope="session")
def env_bundle(tmp_path_factory: pytest.TempPathFactory):
    """`build_bundle` of the running venv (pyspark left out), a gzip archive of stored
    blocks: the archive stays on this machine, and each of the six times the run unpacks
    it (Spark's `gzip -dc | tar -xf` for a DWD application's driver and two executors,
    per engine) took 7.7 CPU-s against 11.7 at level 1; building it, 12.7 against 24.7."""
    from warehouse.bundle import build_bundle

    return build_bundle(tmp_path_factory.mktemp("bundle") / "env.tar.gz", compress_level=0)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """A master and two workers (1 core, 1 GiB each)."""
    with StandaloneCluster(tmp_path_factory.mktemp("cluster"), workers=2) as started:
        yield started


@pytest.fixture(scope="session")
def cluster_archives(
    cluster: StandaloneCluster, tmp_path_factory: pytest.TempPathFactory
) -> ClusterArchives | None:
    """Class archives for the drivers and executors of `cluster`'s applications
    (`class_archives`), made once for the test process; None when the warm-up did not
    write them whole (the JVMs then load their classes from the jars)."""
    return make_archives(cluster, tmp_path_factory.mktemp("class-archives"))


@pytest.fixture(scope="session")
def apache_kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafka]:
    """Three Apache Kafka nodes in one cluster (replication factor 3, min.insync.replicas=2);
    the tests give their topics names of their own."""
    kafka = started_nodes(tmp_path_factory.mktemp("apache-kafka-cluster"), nodes=3)
    try:
        yield kafka
    finally:
        kafka.stop()
