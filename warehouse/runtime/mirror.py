"""`warehouse mirror`: Apache Kafka's MirrorMaker 2 in dedicated mode, from `mirror:`.

The flows of `conf/<env>.yml` become an MM2 properties file (docs/channels.md, "Hub and
spoke"; docs/decisions/0039-mirror-in-the-foreground-exactly-once.md): every cluster by its alias,
every `spoke -> hub` flow enabled with its topics, and exactly-once delivery into each
target (KIP-618: `<target>.exactly.once.source.support=enabled`, with the internal REST
server dedicated mode needs for it). Mirrored topics are `<spoke>.<topic>` (MM2's
`DefaultReplicationPolicy`).

A flow's cluster is an alias of `mirror.clusters` or one of the project's Kafka clusters
(`default`, a name of `kafka.clusters`), whose bootstrap, security and client
properties MirrorMaker then takes as the native engine's Java client does
(`streams.kafka.java_options`), less the librdkafka settings no Java client knows
(`java_client_configs`).

The file holds the clusters' secrets: it is written 0600 and never printed; MirrorMaker
gets its path, not its content, on the command line. MirrorMaker runs in the foreground
as a child JVM on the class path `scripts/kafka-connect.sh` caches; SIGINT and SIGTERM
are passed on to it and `run` returns once it has exited.
"""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from streams.kafka.errors import KafkaConfigError
from streams.kafka.java_options import java_client_options
from warehouse.runtime.errors import MirrorError
from warehouse.runtime.java_client_configs import JAVA_CLIENT_CONFIGS
from warehouse.spec.config import KafkaSecurity, MirrorSettings, WarehouseConfig
from warehouse.spec.table import DEFAULT_CLUSTER

logger = logging.getLogger(__name__)

CONNECT_VERSION = "4.1.1"
SCRIPT = "scripts/kafka-connect.sh"
MAIN = "org.apache.kafka.connect.mirror.MirrorMaker"
JVM_OPTIONS = (
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-Djava.awt.headless=true",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
    "-Dorg.slf4j.simpleLogger.showDateTime=true",
    # What an operator watches: flows starting, tasks, topics created.
    "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.connect.mirror=info",
)
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_LOGIN_MODULE = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def java_security(security: KafkaSecurity) -> dict[str, str]:
    """Java client properties for a `security:` setting (secrets revealed here only)."""
    props = {"security.protocol": security.protocol}
    if security.sasl_mechanism:
        props["sasl.mechanism"] = security.sasl_mechanism
    if security.username is not None or security.password is not None:
        module = _LOGIN_MODULE[security.sasl_mechanism or "PLAIN"]
        user = _jaas_quote(security.username or "")
        password = _jaas_quote(security.password.get_secret_value() if security.password else "")
        props["sasl.jaas.config"] = f'{module} required username="{user}" password="{password}";'
    if security.ssl_ca_location:
        # A PEM file of CA certificates, as librdkafka's `ssl.ca.location` (KIP-651).
        props["ssl.truststore.type"] = "PEM"
        props["ssl.truststore.location"] = security.ssl_ca_location
    return props


def _jaas_quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def topics_pattern(topics: list[str] | str) -> str:
    """MM2's `topics` (comma-separated Java regexes): names matched exactly, a regex as is."""
    if isinstance(topics, str):
        return topics
    return ",".join(_java_literal(t) for t in topics)


def _java_literal(name: str) -> str:
    # Topic names hold letters, digits, `.`, `_` and `-`; of those only `.` means
    # something in a regex.
    return "".join(f"\\{c}" if c in ".^$|?*+()[]{}\\" else c for c in name)


@dataclass(frozen=True)
class MirrorEndpoint:
    """One cluster of the flows as MirrorMaker reaches it: `declared_at` is the field
    that declares it (`mirror.clusters.eu`, `kafka.clusters.eu`, `kafka.bootstrap`)."""

    alias: str
    bootstrap: str
    declared_at: str
    client: dict[str, str] = field(repr=False)
    """Java client properties, secrets included: they go to the properties file only."""


def endpoints(config: WarehouseConfig, *, default_bootstrap: str | None) -> list[MirrorEndpoint]:
    """The clusters `config.mirror`'s flows name, in `MirrorSettings.aliases` order.
    `default_bootstrap`: the running bundled broker's servers, needed only when a flow
    names a default cluster that is `embedded`."""
    kafka, mirror = config.kafka, config.mirror
    out = []
    for alias in mirror.aliases():
        at = config.mirror_cluster_at(alias)
        if alias in mirror.clusters:
            c = mirror.clusters[alias]
            client = {**java_security(c.security), **c.client}
            out.append(MirrorEndpoint(alias, c.bootstrap, f"mirror.clusters.{alias}", client))
            continue
        if at is None:
            raise MirrorError(
                f"flow cluster `{alias}` is neither in `mirror.clusters` nor one of the "
                f"project's Kafka clusters ({', '.join(f'`{c}`' for c in kafka.cluster_names)})"
            )
        default = default_bootstrap if kafka.is_embedded else kafka.bootstrap
        bootstrap = kafka.bootstrap_of(alias, default)
        if bootstrap is None:
            raise MirrorError(
                f"a flow names the `{DEFAULT_CLUSTER}` cluster, which is `embedded` (the "
                "bundled broker) but not resolved: start it and pass its servers"
            )
        try:
            options = java_client_options(kafka.client_config(cluster=alias))
        except KafkaConfigError as e:
            raise MirrorError(f"cluster `{alias}` (`{at}`): {e}") from e
        client = {k: v for k, v in options.items() if k in JAVA_CLIENT_CONFIGS}
        if left_out := [k for k in options if k not in client]:
            logger.info(
                "mirror: cluster %s (`%s`): %s left out of MirrorMaker's properties: "
                "librdkafka settings no Java client knows",
                alias,
                at,
                ", ".join(f"`{k}`" for k in left_out),
            )
        out.append(MirrorEndpoint(alias, bootstrap, at, client))
    return out


def mirror_properties(mirror: MirrorSettings, clusters: list[MirrorEndpoint]) -> dict[str, str]:
    """The MM2 properties of `mirror:` (with secrets) over `clusters` (`endpoints`):
    clusters, flows, exactly once."""
    pairs = mirror.pairs()
    props: dict[str, str] = {"clusters": ", ".join(c.alias for c in clusters)}
    for cluster in clusters:
        props[f"{cluster.alias}.bootstrap.servers"] = cluster.bootstrap
        for key, value in cluster.client.items():
            props[f"{cluster.alias}.{key}"] = value
    for source, target, flow in pairs:
        props[f"{source}->{target}.enabled"] = "true"
        props[f"{source}->{target}.topics"] = topics_pattern(flow.topics)
        # Aborted or open transactions of the spoke are not mirrored.
        props[f"{source}->{target}.source.consumer.isolation.level"] = "read_committed"
    for target in dict.fromkeys(t for _, t, _ in pairs):
        props[f"{target}.exactly.once.source.support"] = "enabled"
    props.update(
        {
            # Exactly once in dedicated mode needs the workers' internal REST server
            # (KIP-710) to fence earlier task generations; on loopback, at a free port.
            "dedicated.mode.enable.internal.rest": "true",
            "listeners": "http://127.0.0.1:0",
            "rest.advertised.host.name": "127.0.0.1",
            # Hub and spoke mirrors records, not access rules.
            "sync.topic.acls.enabled": "false",
        }
    )
    if mirror.replication_factor is not None:
        rf = str(mirror.replication_factor)
        for key in (
            "replication.factor",
            "checkpoints.topic.replication.factor",
            "heartbeats.topic.replication.factor",
            "offset-syncs.topic.replication.factor",
            "config.storage.replication.factor",
            "offset.storage.replication.factor",
            "status.storage.replication.factor",
        ):
            props[key] = rf
    props.update(mirror.properties)
    return props


def _escape(text: str, *, key: bool) -> str:
    """`text` as java.util.Properties reads it back."""
    out = []
    for i, c in enumerate(text):
        if c == "\\":
            out.append("\\\\")
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\t":
            out.append("\\t")
        elif c in "=:#!" and key:
            out.append("\\" + c)
        elif c == " " and (key or i == 0):
            out.append("\\ ")
        elif ord(c) > 0x7E:
            out.append(f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else c)
        else:
            out.append(c)
    return "".join(out)


def render_properties(props: Mapping[str, str]) -> str:
    return "".join(f"{_escape(k, key=True)}={_escape(v, key=False)}\n" for k, v in props.items())


def write_properties(path: Path, props: Mapping[str, str]) -> Path:
    """Write `props` to `path`, readable by its owner only from its first byte."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(render_properties(props))
    os.replace(tmp, path)
    return path


def connect_cache(environ: Mapping[str, str]) -> Path:
    override = environ.get("KAFKA_CONNECT_CACHE")
    home = Path(environ.get("HOME") or Path.home())
    root = Path(override) if override else home / ".cache" / "spark-warehouse" / "kafka-connect"
    return root / CONNECT_VERSION


def cached_classpath(environ: Mapping[str, str]) -> str:
    """The cached MirrorMaker class path; `MirrorError` saying how to cache it."""
    root = connect_cache(environ)
    how = f"Run `make install` or `{SCRIPT}` (they resolve it from Maven Central into `{root}`)."
    listing = root / "classpath"
    if not listing.is_file():
        raise MirrorError(
            f"MirrorMaker 2 (Kafka {CONNECT_VERSION}) is not cached: no `{listing}`. {how}"
        )
    jars = [line for line in listing.read_text().splitlines() if line]
    missing = [j for j in jars if not Path(j).is_file()]
    if missing:
        raise MirrorError(
            f"the Kafka Connect cache in `{root}` is incomplete ({len(missing)} of {len(jars)} "
            f"jars missing, e.g. `{missing[0]}`). {how}"
        )
    if not any(Path(j).name == f"connect-mirror-{CONNECT_VERSION}.jar" for j in jars):
        raise MirrorError(f"the Kafka Connect cache in `{root}` has no MirrorMaker 2 jar. {how}")
    return os.pathsep.join(jars)


def java_binary(environ: Mapping[str, str]) -> str:
    home = environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java", path=environ.get("PATH"))
    if found is None:
        raise MirrorError("no Java: set `JAVA_HOME` or put `java` (17 or later) on `PATH`")
    return found


def work_dir(mirror: MirrorSettings, root: str, project_dir: Path) -> Path:
    """Where the properties file goes: `mirror.work_dir`, `<root>/mirror` for a local
    root, else a new temporary folder."""
    if mirror.work_dir:
        path = Path(mirror.work_dir).expanduser()
        return path if path.is_absolute() else project_dir / path
    if "://" not in root or root.startswith("file://"):
        return Path(root.removeprefix("file://")) / "mirror"
    return Path(tempfile.mkdtemp(prefix="warehouse-mirror-"))


def _die_with_parent(parent: int) -> None:
    """In the child before it runs Java: on Linux, SIGKILL it when `warehouse mirror`
    dies, however it dies (a SIGKILL cannot be passed on), so that no MirrorMaker outlives
    the command that started it (docs/decisions/0039-mirror-in-the-foreground-exactly-once.md)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # it died before the line above: nothing will signal
            os._exit(1)


def command(java: str, classpath: str, properties: Path, clusters: list[str]) -> list[str]:
    """MirrorMaker's command line: the file's path and the target clusters, no secret."""
    return [java, *JVM_OPTIONS, "-cp", classpath, MAIN, str(properties), "--clusters", *clusters]


def describe(mirror: MirrorSettings, clusters: list[MirrorEndpoint]) -> list[str]:
    """What `warehouse mirror` prints before it starts: each cluster with its servers and
    the field declaring it, then each flow. No secret: those are in the file only."""
    lines = [f"cluster {c.alias}: {c.bootstrap} (from `{c.declared_at}`)" for c in clusters]
    for source, target, flow in mirror.pairs():
        topics = flow.topics if isinstance(flow.topics, str) else ", ".join(flow.topics)
        lines.append(f"flow {source} -> {target}: {topics} (arriving as `{source}.<topic>`)")
    return lines


def run(
    config: WarehouseConfig,
    *,
    root: str,
    project_dir: Path,
    environ: Mapping[str, str],
    start_embedded: Callable[[], str] | None = None,
    out: Callable[[str], None] | None = None,
) -> int:
    """Run MirrorMaker 2 for `config.mirror`'s flows until it exits or this process is told
    to stop (SIGINT/SIGTERM, passed on to it); its exit status (0 after a requested stop).
    `start_embedded`: starts the bundled broker (or finds it running) and returns its
    servers, called once Java and the jars are found, when a flow names a default cluster
    that is `embedded`. `out` gets the clusters and flows (`describe`) before MirrorMaker
    starts."""
    mirror = config.mirror
    pairs = mirror.pairs()
    if not pairs:
        raise MirrorError(
            "`mirror.flows` is empty: add a flow to conf/<env>.yml, e.g. "
            "`mirror: {flows: {eu -> default: {topics: [orders]}}}` with `eu` under "
            "`kafka.clusters` (or `mirror.clusters`)"
        )
    classpath = cached_classpath(environ)
    java = java_binary(environ)
    default = None
    if config.kafka.is_embedded and DEFAULT_CLUSTER in mirror.aliases() and start_embedded:
        default = start_embedded()
    clusters = endpoints(config, default_bootstrap=default)
    path = write_properties(
        work_dir(mirror, root, project_dir) / "mm2.properties",
        mirror_properties(mirror, clusters),
    )
    targets = list(dict.fromkeys(t for _, t, _ in pairs))
    # This process runs only the targets' workers: a hub's MirrorMaker reads every spoke.
    argv = command(java, classpath, path, targets)
    logger.info(
        "mirror: %s into %s; properties in %s", [f"{s} -> {t}" for s, t, _ in pairs], targets, path
    )
    for line in describe(mirror, clusters):
        logger.info("mirror: %s", line)
        if out is not None:
            out(line)
    parent = os.getpid()
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, preexec_fn=lambda: _die_with_parent(parent)
    )
    stopping: list[int] = []

    def forward(signum: int, _frame: FrameType | None) -> None:
        stopping.append(signum)
        if proc.poll() is None:
            proc.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = proc.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if stopping:
        logger.info("mirror: stopped on signal %d (MirrorMaker exit status %d)", stopping[0], code)
        return 0
    return code
