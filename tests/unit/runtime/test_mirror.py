"""`warehouse mirror`'s half that needs no cluster: the `mirror:` section as conf/<env>.yml
gives it (validated at load, errors with file and field), the clusters its flows name
(`mirror.clusters` or the project's Kafka clusters), the MirrorMaker 2 properties file it
becomes, and what the command line and the cache check say."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.spec.conftest import assert_problems
from warehouse import Project, ProjectError
from warehouse.runtime import mirror
from warehouse.runtime.errors import MirrorError

MIRROR = """
mirror:
  clusters:
    eu: {bootstrap: "eu1:9092,eu2:9092", security: {protocol: SASL_SSL, sasl_mechanism: SCRAM-SHA-512, username: mm2, password: "${EU_PW}", ssl_ca_location: /etc/ca.pem}}
    us-east: {bootstrap: "us:9092", client: {request.timeout.ms: 60000}}
    hub: {bootstrap: "hub:9092"}
  flows:
    eu -> hub: {topics: [orders, orders.v2]}
    us-east->hub: {topics: "payments|refunds\\\\..*"}
  replication_factor: 3
  properties: {eu->hub.tasks.max: 4}
"""


def project(tmp_path: Path, conf: str) -> Path:
    (tmp_path / "layers" / "ods").mkdir(parents=True)
    (tmp_path / "layers" / "ods" / "orders.yml").write_text(
        "table: ods_orders\nsource: {kafka: {topic: eu.orders, format: raw}}\n"
    )
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "local.yml").write_text(conf)
    return tmp_path


def load(tmp_path: Path, conf: str = MIRROR) -> Project:
    return Project.load(project(tmp_path, conf), environ={"EU_PW": 'p"w\\1'})


def problems(tmp_path: Path, conf: str) -> dict[tuple[str, str], str]:
    with pytest.raises(ProjectError) as info:
        load(tmp_path, conf)
    return {(p.path, p.field): p.message for p in info.value.problems}


def properties(project: Project, default_bootstrap: str | None = None) -> dict[str, str]:
    config = project.config
    clusters = mirror.endpoints(config, default_bootstrap=default_bootstrap)
    return mirror.mirror_properties(config.mirror, clusters)


def test_flows_clusters_and_exactly_once_into_each_target(tmp_path: Path) -> None:
    props = properties(load(tmp_path))
    assert props["clusters"] == "eu, us-east, hub"
    assert props["eu.bootstrap.servers"] == "eu1:9092,eu2:9092"
    assert props["eu->hub.enabled"] == props["us-east->hub.enabled"] == "true"
    # Names are matched exactly (MM2 reads `topics` as regexes); a regex is kept as given.
    assert props["eu->hub.topics"] == r"orders,orders\.v2"
    assert re.fullmatch(props["eu->hub.topics"].split(",")[1], "orders.v2")
    assert not re.fullmatch(props["eu->hub.topics"].split(",")[1], "ordersXv2")
    assert props["us-east->hub.topics"] == r"payments|refunds\..*"
    assert props["us-east.request.timeout.ms"] == "60000"
    assert props["hub.exactly.once.source.support"] == "enabled"
    assert "eu.exactly.once.source.support" not in props
    assert props["dedicated.mode.enable.internal.rest"] == "true"
    assert props["eu->hub.source.consumer.isolation.level"] == "read_committed"
    assert props["offset-syncs.topic.replication.factor"] == "3"
    assert props["replication.factor"] == "3"
    assert props["eu->hub.tasks.max"] == "4"  # `properties:` last


def test_security_becomes_java_client_properties(tmp_path: Path) -> None:
    props = properties(load(tmp_path))
    assert props["eu.security.protocol"] == "SASL_SSL"
    assert props["eu.sasl.mechanism"] == "SCRAM-SHA-512"
    assert props["eu.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="mm2" password="p\\"w\\\\1";'
    )
    assert props["eu.ssl.truststore.type"] == "PEM"
    assert props["eu.ssl.truststore.location"] == "/etc/ca.pem"
    assert props["hub.security.protocol"] == "PLAINTEXT"
    assert "hub.sasl.jaas.config" not in props


def test_the_file_is_owner_only_and_reads_back_as_java_properties(tmp_path: Path) -> None:
    props = {"a.b": "x=y: z", "k:ey": " lead\\back\tslash", "eu->hub.topics": r"orders\.v2"}
    path = mirror.write_properties(tmp_path / "m" / "mm2.properties", props)
    assert path.stat().st_mode & 0o777 == 0o600
    text = path.read_text()
    assert "eu->hub.topics=orders\\\\.v2\n" in text
    assert read_java_properties(text) == props


def read_java_properties(text: str) -> dict[str, str]:
    """java.util.Properties' reading of `key=value` lines: a backslash escapes the next
    character (`\\t`, `\\n`, `\\r`, `\\f` and `\\uXXXX` are the special ones), blanks
    before a value are dropped."""
    special = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
    out = {}
    for line in text.splitlines():
        parts: list[list[str]] = [[]]
        i = 0
        while i < len(line):
            c = line[i]
            if c == "\\":
                nxt = line[i + 1]
                if nxt == "u":
                    parts[-1].append(chr(int(line[i + 2 : i + 6], 16)))
                    i += 6
                    continue
                parts[-1].append(special.get(nxt, nxt))
                i += 2
                continue
            if c == "=" and len(parts) == 1:
                parts.append([])
                i += 1
                while i < len(line) and line[i] in " \t":
                    i += 1
                continue
            parts[-1].append(c)
            i += 1
        key, value = ("".join(p) for p in parts)
        out[key] = value
    return out


def test_command_line_names_the_file_and_the_targets_never_a_secret(tmp_path: Path) -> None:
    settings = load(tmp_path).config.mirror
    argv = mirror.command("/usr/bin/java", "a.jar:b.jar", tmp_path / "mm2.properties", ["hub"])
    assert argv[-4:] == [mirror.MAIN, str(tmp_path / "mm2.properties"), "--clusters", "hub"]
    assert not any('p"w' in a for a in argv)
    assert 'p\\"w' not in repr(settings)  # SecretStr


@pytest.mark.parametrize(
    ("conf", "field", "says"),
    [
        (
            "mirror: {clusters: {eu: {bootstrap: a:1}}, flows: {eu -> hub: {topics: [t]}}}",
            "mirror.flows",
            "names the cluster `hub`, which conf/local.yml does not declare",
        ),
        (
            "mirror: {clusters: {eu: {bootstrap: a:1}, hub: {bootstrap: b:1}}, flows: {eu to hub: {topics: [t]}}}",
            "mirror.flows",
            "spoke -> hub",
        ),
        (
            "mirror: {clusters: {eu: {bootstrap: a:1}}, flows: {eu -> eu: {topics: [t]}}}",
            "mirror.flows",
            "into itself",
        ),
        ("mirror: {clusters: {eu.west: {bootstrap: a:1}}}", "mirror.clusters", "`eu.west`"),
        (
            "mirror: {clusters: {eu: {bootstrap: a:1}, hub: {bootstrap: b:1}}, flows: {eu -> hub: {topics: []}}}",
            "mirror.flows.eu -> hub.topics",
            "at least one topic",
        ),
        (
            "mirror: {clusters: {eu: {bootstrap: a:1}, hub: {bootstrap: b:1}}, flows: {eu -> hub: {topics: '(['}}}",
            "mirror.flows.eu -> hub.topics",
            "not a regex",
        ),
        (
            "mirror: {clusters: {eu: {bootstrap: a:1, colour: red}}}",
            "mirror.clusters.eu.colour",
            "",
        ),
        ("mirror: {replication_factor: 0}", "mirror.replication_factor", ""),
    ],
)
def test_a_bad_mirror_section_names_file_and_field(
    tmp_path: Path, conf: str, field: str, says: str
) -> None:
    got = problems(tmp_path, conf)
    assert list(got) == [("conf/local.yml", field)], got
    assert says in got["conf/local.yml", field]


def test_no_flows_and_no_cache_are_clear_errors(tmp_path: Path) -> None:
    empty = Project.load(project(tmp_path, "mirror: {}\n"), environ={})
    with pytest.raises(MirrorError, match="`mirror.flows` is empty"):
        mirror.run(empty.config, root=str(tmp_path), project_dir=tmp_path, environ={})
    with pytest.raises(
        MirrorError, match=r"not cached.*`make install` or `scripts/kafka-connect.sh`"
    ):
        mirror.cached_classpath({"KAFKA_CONNECT_CACHE": str(tmp_path / "none")})
    (tmp_path / "cache" / mirror.CONNECT_VERSION).mkdir(parents=True)
    jar = tmp_path / "connect-runtime.jar"
    jar.touch()
    (tmp_path / "cache" / mirror.CONNECT_VERSION / "classpath").write_text(f"{jar}\n")
    with pytest.raises(MirrorError, match="no MirrorMaker 2 jar"):
        mirror.cached_classpath({"KAFKA_CONNECT_CACHE": str(tmp_path / "cache")})


def test_the_command_says_what_is_missing_without_a_traceback(tmp_path: Path) -> None:
    # A folder with only `conf/` will do: MirrorMaker needs no tables.
    path = tmp_path / "ops"
    (path / "conf").mkdir(parents=True)
    (path / "conf" / "local.yml").write_text(MIRROR.replace("${EU_PW}", "x"))
    repo = Path(__file__).resolve().parents[3]
    done = subprocess.run(
        [sys.executable, "-m", "warehouse", "mirror", "--project", str(path)],
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo), "KAFKA_CONNECT_CACHE": str(tmp_path / "none")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: MirrorMaker 2 (Kafka 4.1.1) is not cached"), done.stderr
    assert "Traceback" not in done.stderr


# The project's Kafka: a SASL default cluster (the hub) and `eu`; `us` only MirrorMaker's.
SHARED = """
kafka:
  bootstrap: "hub1:9092"
  security: {protocol: SASL_SSL, sasl_mechanism: PLAIN, username: wh, password: "${HUB_PW}"}
  client: {client.id: warehouse}
  clusters:
    eu: {bootstrap: "eu1:9092", security: {protocol: SASL_SSL, sasl_mechanism: SCRAM-SHA-512,
         username: mm2, password: "${EU_PW}", ssl_ca_location: /etc/ca.pem},
         client: {request.timeout.ms: 60000}}
mirror:
  clusters:
    us: {bootstrap: "us:9092"}
  flows:
    eu -> default: {topics: [orders]}
    us -> default: {topics: [payments]}
"""


def load_shared(tmp_path: Path, conf: str = SHARED) -> Project:
    return Project.load(project(tmp_path, conf), environ={"EU_PW": "eu-secret", "HUB_PW": "hub-pw"})


def test_a_flow_takes_a_project_cluster_as_the_tables_reach_it(tmp_path: Path) -> None:
    loaded = load_shared(tmp_path)
    config = loaded.config
    props = properties(loaded)
    # `mirror.clusters` first, then the project's clusters in the flows' order.
    assert props["clusters"] == "us, eu, default"
    assert props["eu.bootstrap.servers"] == "eu1:9092"
    assert props["default.bootstrap.servers"] == "hub1:9092"
    assert props["us.bootstrap.servers"] == "us:9092"
    # The Java client settings the native engine reads `eu` with: same login, same CA.
    assert props["eu.security.protocol"] == "SASL_SSL"
    assert props["eu.sasl.mechanism"] == "SCRAM-SHA-512"
    assert props["eu.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="mm2" password="eu-secret";'
    )
    assert props["eu.ssl.truststore.type"] == "PEM"
    assert props["eu.ssl.truststore.location"] == "/etc/ca.pem"
    assert props["eu.request.timeout.ms"] == "60000"
    assert "eu.sasl.username" not in props and "eu.ssl.ca.location" not in props
    assert props["default.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="wh" password="hub-pw";'
    )
    assert props["default.client.id"] == "warehouse"
    assert props["us.security.protocol"] == "PLAINTEXT"
    assert props["default.exactly.once.source.support"] == "enabled"
    assert props["eu->default.topics"] == "orders"
    assert [(c.alias, c.declared_at) for c in mirror.endpoints(config, default_bootstrap=None)] == [
        ("us", "mirror.clusters.us"),
        ("eu", "kafka.clusters.eu"),
        ("default", "kafka.bootstrap"),
    ]


def test_a_project_cluster_gives_mirrormaker_only_client_keys_a_java_client_knows(
    tmp_path: Path,
) -> None:
    # librdkafka names (the Python engine's) beside ones both clients share: only the
    # shared ones reach MirrorMaker's producers, consumers and admin clients.
    conf = SHARED.replace(
        "client: {client.id: warehouse}",
        "client: {client.id: warehouse, socket.keepalive.enable: true, "
        "queue.buffering.max.ms: 50, linger.ms: 50}",
    ).replace(
        "client: {request.timeout.ms: 60000}",
        "client: {request.timeout.ms: 60000, topic.metadata.refresh.interval.ms: 1000, "
        "enable.ssl.certificate.verification: false}",
    )
    props = properties(load_shared(tmp_path, conf))
    assert props["default.client.id"] == "warehouse"
    assert props["default.linger.ms"] == "50"
    assert props["eu.request.timeout.ms"] == "60000"
    for key in (
        "default.socket.keepalive.enable",
        "default.queue.buffering.max.ms",
        "eu.topic.metadata.refresh.interval.ms",
        "eu.enable.ssl.certificate.verification",
    ):
        assert key not in props, key
    # The login and the CA, translated for the Java client, stay.
    assert props["eu.sasl.jaas.config"].startswith("org.apache.kafka.common.security.scram.")
    assert props["eu.ssl.truststore.location"] == "/etc/ca.pem"
    assert props["default.security.protocol"] == "SASL_SSL"


def test_the_printed_plan_says_where_each_cluster_comes_from_and_no_secret(
    tmp_path: Path,
) -> None:
    config = load_shared(tmp_path).config
    clusters = mirror.endpoints(config, default_bootstrap=None)
    lines = mirror.describe(config.mirror, clusters)
    assert lines == [
        "cluster us: us:9092 (from `mirror.clusters.us`)",
        "cluster eu: eu1:9092 (from `kafka.clusters.eu`)",
        "cluster default: hub1:9092 (from `kafka.bootstrap`)",
        "flow eu -> default: orders (arriving as `eu.<topic>`)",
        "flow us -> default: payments (arriving as `us.<topic>`)",
    ]
    shown = "\n".join(lines) + repr(clusters)
    assert "eu-secret" not in shown and "hub-pw" not in shown


def test_a_project_cluster_the_java_client_cannot_log_in_with_names_its_field(
    tmp_path: Path,
) -> None:
    conf = SHARED.replace("client: {request.timeout.ms: 60000}", "client: {sasl.mechanism: GSSAPI}")
    config = load_shared(tmp_path, conf).config
    with pytest.raises(MirrorError, match=r"cluster `eu` \(`kafka.clusters.eu`\).*`GSSAPI`"):
        mirror.endpoints(config, default_bootstrap=None)


def test_an_embedded_default_cluster_is_the_running_broker(tmp_path: Path) -> None:
    conf = SHARED.replace('bootstrap: "hub1:9092"', "bootstrap: embedded")
    config = load_shared(tmp_path, conf).config
    props = mirror.mirror_properties(
        config.mirror, mirror.endpoints(config, default_bootstrap="127.0.0.1:40123")
    )
    assert props["default.bootstrap.servers"] == "127.0.0.1:40123"
    with pytest.raises(MirrorError, match="`default` cluster.*`embedded`.*not resolved"):
        mirror.endpoints(config, default_bootstrap=None)
    # No broker is started for a MirrorMaker that cannot run.
    started: list[str] = []
    with pytest.raises(MirrorError, match="not cached"):
        mirror.run(
            config,
            root=str(tmp_path),
            project_dir=tmp_path,
            environ={"KAFKA_CONNECT_CACHE": str(tmp_path / "none")},
            start_embedded=lambda: started.append("broker") or "127.0.0.1:1",
        )
    assert started == []


@pytest.mark.parametrize(
    ("mirror_section", "expected"),
    [
        (
            # Declared twice: in `mirror.clusters` and as the project's cluster.
            "mirror: {clusters: {eu: {bootstrap: x:1}, default: {bootstrap: y:1}}, "
            "flows: {eu -> default: {topics: [t]}}}",
            [
                (
                    "mirror.clusters.eu",
                    [
                        "`eu` is declared twice",
                        "`kafka.clusters.eu` in conf/local.yml",
                        "remove `mirror.clusters.eu`",
                    ],
                ),
                (
                    "mirror.clusters.default",
                    ["`default` is declared twice", "`kafka.bootstrap`"],
                ),
            ],
        ),
        (
            # Declared nowhere: the known names, and the close one.
            "mirror: {flows: {eux -> default: {topics: [t]}, eu -> hubb: {topics: [t]}}}",
            [
                (
                    "mirror.flows",
                    [
                        "flow `eux -> default`",
                        "`eux`",
                        "does not declare",
                        "(clusters: `default`, `eu`)",
                        "`kafka.clusters`",
                        "Did you mean `eu`?",
                    ],
                ),
                ("mirror.flows", ["flow `eu -> hubb`", "`hubb`", "`default`, `eu`"]),
            ],
        ),
    ],
)
def test_a_flow_cluster_declared_twice_or_nowhere_is_a_load_error(
    tmp_path: Path, mirror_section: str, expected: list[tuple[str, list[str]]]
) -> None:
    conf = "kafka:\n  bootstrap: hub:9092\n  clusters: {eu: {bootstrap: eu:9092}}\n"
    with pytest.raises(ProjectError) as info:
        Project.load(project(tmp_path, conf + mirror_section + "\n"), environ={})
    assert_problems(info.value, [("conf/local.yml", f, words) for f, words in expected])
    assert all(p.line for p in info.value.problems), info.value.problems
