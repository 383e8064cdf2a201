"""The ACL authorizer on both brokers (`secure_brokers`: StandardAuthorizer,
`allow.everyone.if.no.acl.found=false`, `User:alice` a super user): what a SCRAM user with
no ACL is refused by each API and with which error, what ACLs created by `alice` then
allow, and the ACL APIs themselves (raw, through confluent-kafka and Kafka's `kafka-acls`),
compared between the bundled broker and Apache Kafka.

Each scenario makes its own user, topics and group (`unique`); answers name them as
`<user>`, `<topic>`, `<group>`. What is compared is what the clients report: error codes
(each broker words some messages itself), ACL listings, tool output.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kio.schema.create_acls.v3 import request as create_req
from kio.schema.create_acls.v3.response import CreateAclsResponse
from kio.schema.describe_user_scram_credentials.v0 import request as describe_scram_req
from kio.schema.describe_user_scram_credentials.v0.response import (
    DescribeUserScramCredentialsResponse,
)
from kio.static.primitive import i8

from tests.integration.oracle.differential import on_both, unique
from tests.support.apache_kafka import SASL_USERS
from tests.support.broker_wire import Wire
from tests.support.java_client import JavaClient
from tests.support.kafka_tools import run as kafka_tool

# Every API refused and allowed on both brokers: over 2 minutes on a busy machine.
pytestmark = [pytest.mark.kafka, pytest.mark.timeout(1200)]

ADMIN, ADMIN_PASSWORD = next(iter(SASL_USERS.items()))
PASSWORD = "acl-oracle-pw-6b90"


def _plain(user: str, password: str) -> dict[str, Any]:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": password,
        "log_level": 0,
    }


def _scram(user: str) -> dict[str, Any]:
    return {
        **_plain(user, PASSWORD),
        "sasl.mechanism": "SCRAM-SHA-256",
    }


class _World:
    """One scenario's names on one broker: a SCRAM user, a topic with a record, a group."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.user, self.topic, self.group = unique("acl-user"), unique("acl"), unique("acl-g")
        self.txn = unique("acl-txn")
        self.admin = AdminClient({"bootstrap.servers": bootstrap, **_plain(ADMIN, ADMIN_PASSWORD)})
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
        upsertion = UserScramCredentialUpsertion(self.user, info, PASSWORD.encode())
        self.admin.alter_user_scram_credentials([upsertion])[self.user].result(30)
        self.admin.create_topics([NewTopic(self.topic, 1, 1)])[self.topic].result(30)
        p = Producer({"bootstrap.servers": bootstrap, **_plain(ADMIN, ADMIN_PASSWORD)})
        p.produce(self.topic, value=b"first", partition=0)
        assert p.flush(30) == 0
        self.as_user = AdminClient({"bootstrap.servers": bootstrap, **_scram(self.user)})

    def names(self, text: str) -> str:
        for name, shown in (
            (self.user, "<user>"),
            (self.topic, "<topic>"),
            (self.group, "<group>"),
            (self.txn, "<txn>"),
        ):
            text = text.replace(name, shown)
        return text

    def grant(self, rtype: ResourceType, name: str, operation: AclOperation, **kw: Any) -> None:
        binding = AclBinding(
            rtype,
            name,
            kw.get("pattern", ResourcePatternType.LITERAL),
            f"User:{self.user}",
            "*",
            operation,
            kw.get("permission", AclPermissionType.ALLOW),
        )
        for f in self.admin.create_acls([binding]).values():
            f.result(30)
        # Apache Kafka answers CreateAcls once the ACL is in its metadata log and its
        # authorizer applies it a moment later; what the scenarios ask next is asked of
        # the authorizer, so the ACL is taken as made once a listing shows it.
        exact = AclBindingFilter(
            binding.restype,
            binding.name,
            binding.resource_pattern_type,
            binding.principal,
            binding.host,
            binding.operation,
            binding.permission_type,
        )
        deadline = time.monotonic() + 30
        while not self.admin.describe_acls(exact).result(30):
            assert time.monotonic() < deadline, f"ACL not listed 30 s after its creation: {binding}"
            time.sleep(0.1)


def _code(call: Any) -> str:
    """The Kafka error a client call ends with, by name; `ok` when it succeeds."""
    try:
        call()
    except KafkaException as e:
        return e.args[0].name()
    return "ok"


def _produce(w: _World, **extra: Any) -> str:
    seen: list[Any] = []
    p = Producer(
        {"bootstrap.servers": w.bootstrap, "message.timeout.ms": 10000, **_scram(w.user), **extra}
    )
    p.produce(w.topic, value=b"v", partition=0, on_delivery=lambda err, _m: seen.append(err))
    p.flush(20)
    return "ok" if seen and seen[0] is None else (seen[0].name() if seen else "no report")


def _consume(w: _World) -> str:
    c = Consumer(
        {
            "bootstrap.servers": w.bootstrap,
            "group.id": w.group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **_scram(w.user),
        }
    )
    try:
        c.subscribe([w.topic])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            msg = c.poll(1)
            if msg is None:
                continue
            if msg.error() is not None:
                return msg.error().name()
            return _code(lambda m=msg: c.commit(m, asynchronous=False)) + f":{msg.value().decode()}"
        return "timeout"
    finally:
        c.close()


def _assigned_read(w: _World) -> str:
    """A consumer that assigns the partition itself: READ on the topic is what fetching
    needs. Its group's coordinator lookup may fail meanwhile (no ACL on the group yet),
    which librdkafka reports as an error event beside the fetch, in no fixed order: such
    reports are skipped, the first record or topic error is the answer."""
    c = Consumer({"bootstrap.servers": w.bootstrap, "group.id": w.group, **_scram(w.user)})
    try:
        c.assign([TopicPartition(w.topic, 0, 0)])
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            msg = c.poll(1)
            if msg is None:
                continue
            if msg.error() is None:
                return msg.value().decode()
            if msg.error().code() != KafkaError.GROUP_AUTHORIZATION_FAILED:
                return msg.error().name()
        return "timeout"
    finally:
        c.close()


def _transactional(w: _World) -> str:
    p = Producer({"bootstrap.servers": w.bootstrap, "transactional.id": w.txn, **_scram(w.user)})
    code = _code(lambda: p.init_transactions(20))
    if code != "ok":
        return code
    p.begin_transaction()
    p.produce(w.topic, value=b"txn", partition=0)
    return _code(lambda: p.commit_transaction(20))


def _admin_calls(w: _World) -> dict[str, str]:
    a, topic = w.as_user, w.topic
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    node = next(iter(a.list_topics(timeout=30).brokers))  # 0 here, 1 on the Kafka fixture
    broker_resource = ConfigResource(ConfigResource.Type.BROKER, str(node))
    metadata = a.list_topics(topic=topic, timeout=30).topics[topic]
    everything = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    return {
        "metadata_named": metadata.error.name() if metadata.error else "ok",
        "listed": str(topic in a.list_topics(timeout=30).topics),
        "list_offsets": _code(
            lambda: a.list_offsets({TopicPartition(topic, 0): OffsetSpec.latest()})[
                TopicPartition(topic, 0)
            ].result(30)
        ),
        "create_topic": _code(
            lambda: a.create_topics([NewTopic(topic + "-new", 1, 1)])[topic + "-new"].result(30)
        ),
        "create_partitions": _code(
            lambda: a.create_partitions([NewPartitions(topic, 2)])[topic].result(30)
        ),
        "describe_configs": _code(lambda: a.describe_configs([resource])[resource].result(30)),
        "describe_broker_configs": _code(
            lambda: a.describe_configs([broker_resource])[broker_resource].result(30)
        ),
        "delete_records": _code(
            lambda: a.delete_records([TopicPartition(topic, 0, 0)])[
                TopicPartition(topic, 0, 0)
            ].result(30)
        ),
        "describe_group": _code(lambda: a.describe_consumer_groups([w.group])[w.group].result(30)),
        "group_offsets": _code(
            lambda: a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(w.group)])[
                w.group
            ].result(30)
        ),
        "delete_group": _code(lambda: a.delete_consumer_groups([w.group])[w.group].result(30)),
        "describe_acls": _code(lambda: a.describe_acls(everything).result(30)),
        "create_acls": _code(
            lambda: [
                f.result(30)
                for f in a.create_acls(
                    [
                        AclBinding(
                            ResourceType.TOPIC,
                            topic,
                            ResourcePatternType.LITERAL,
                            f"User:{w.user}",
                            "*",
                            AclOperation.ALL,
                            AclPermissionType.ALLOW,
                        )
                    ]
                ).values()
            ]
        ),
        # librdkafka aborts on Kafka's refusal of this one: asked on the wire
        "describe_scram": _describe_scram(w),
        "delete_topic": _code(lambda: a.delete_topics([topic])[topic].result(30)),
    }


def _describe_scram(w: _World) -> str:
    request = describe_scram_req.DescribeUserScramCredentialsRequest(
        users=(describe_scram_req.UserName(name=w.user),)
    )
    with Wire(w.bootstrap) as wire:
        wire.sasl_scram(w.user, PASSWORD)
        answer = wire.call(request, DescribeUserScramCredentialsResponse)
    return answer.error_code.name


def refusals(bootstrap: str) -> dict[str, Any]:
    """A user with no ACL, then with the ACLs a producer and a consumer need, one by one."""
    w = _World(bootstrap)
    out: dict[str, Any] = {
        "none": {
            "produce": _produce(w),
            "consume": _consume(w),
            "assigned_read": _assigned_read(w),
            "transaction": _transactional(w),
            **_admin_calls(w),
        }
    }
    w.grant(ResourceType.TOPIC, w.topic, AclOperation.WRITE)
    out["write"] = {
        "produce": _produce(w),
        "idempotent": _produce(w, **{"enable.idempotence": True}),
    }
    w.grant(ResourceType.TOPIC, w.topic, AclOperation.READ)
    out["read"] = {"consume": _consume(w), "assigned_read": _assigned_read(w)}
    w.grant(ResourceType.GROUP, w.group, AclOperation.READ)
    out["group"] = {"consume": _consume(w)}
    w.grant(ResourceType.TRANSACTIONAL_ID, w.txn, AclOperation.WRITE)
    out["txn"] = {"transaction": _transactional(w)}
    w.grant(ResourceType.TOPIC, w.topic, AclOperation.WRITE, permission=AclPermissionType.DENY)
    out["deny"] = {"produce": _produce(w), "consume": _consume(w)}
    return out


def test_what_each_api_refuses_and_acls_allow(secure_brokers: dict[str, str]) -> None:
    on_bundled, on_kafka = on_both(secure_brokers, refusals)
    assert on_kafka["none"]["produce"] == "TOPIC_AUTHORIZATION_FAILED"
    assert on_kafka["write"]["produce"] == "ok"
    assert on_kafka["group"]["consume"] == "ok:first"
    assert on_bundled == on_kafka


def _filter(**kw: Any) -> AclBindingFilter:
    return AclBindingFilter(
        kw.get("rtype", ResourceType.ANY),
        kw.get("name"),
        kw.get("pattern", ResourcePatternType.ANY),
        kw.get("principal"),
        kw.get("host"),
        kw.get("op", AclOperation.ANY),
        kw.get("perm", AclPermissionType.ANY),
    )


def _shown(w: _World, bindings: list[AclBinding]) -> list[tuple[str, ...]]:
    return sorted(
        (
            b.restype.name,
            w.names(b.name),
            b.resource_pattern_type.name,
            w.names(b.principal),
            b.host,
            b.operation.name,
            b.permission_type.name,
        )
        for b in bindings
    )


def acl_apis(bootstrap: str) -> dict[str, Any]:
    """CreateAcls, DescribeAcls with filters, DeleteAcls: listings and validation."""
    w = _World(bootstrap)
    prefix = w.topic + "."
    w.grant(ResourceType.TOPIC, w.topic, AclOperation.READ)
    w.grant(ResourceType.TOPIC, prefix, AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED)
    w.grant(ResourceType.GROUP, w.group, AclOperation.ALL)
    w.grant(ResourceType.TOPIC, w.topic, AclOperation.WRITE, permission=AclPermissionType.DENY)
    mine = f"User:{w.user}"
    out: dict[str, Any] = {}
    for name, f in {
        "by_principal": _filter(principal=mine),
        "topic_literal": _filter(
            rtype=ResourceType.TOPIC,
            name=w.topic,
            pattern=ResourcePatternType.LITERAL,
            principal=mine,
        ),
        "match_child": _filter(
            rtype=ResourceType.TOPIC,
            name=prefix + "x",
            pattern=ResourcePatternType.MATCH,
            principal=mine,
        ),
        "deny_only": _filter(principal=mine, perm=AclPermissionType.DENY),
        "write_only": _filter(principal=mine, op=AclOperation.WRITE),
    }.items():
        out[name] = _shown(w, w.admin.describe_acls(f).result(30))
    deleted = w.admin.delete_acls(
        [_filter(rtype=ResourceType.TOPIC, principal=mine, op=AclOperation.WRITE)]
    )
    out["deleted"] = [_shown(w, f.result(30)) for f in deleted.values()]
    out["after_delete"] = _shown(w, w.admin.describe_acls(_filter(principal=mine)).result(30))
    out["invalid"] = _invalid_creations(w)
    out["raw"] = _raw_listing(w)
    return out


def _raw_listing(w: _World) -> dict[str, Any]:
    """DescribeAcls and DeleteAcls on the wire: the messages a client library hides."""
    from kio.schema.delete_acls.v3 import request as delete_req
    from kio.schema.delete_acls.v3.response import DeleteAclsResponse
    from kio.schema.describe_acls.v3 import request as describe_req
    from kio.schema.describe_acls.v3.response import DescribeAclsResponse

    wanted = {
        "resource_type_filter": i8(3),
        "resource_name_filter": w.group,
        "pattern_type_filter": i8(3),
        "principal_filter": f"User:{w.user}",
        "host_filter": None,
        "operation": i8(1),
        "permission_type": i8(1),
    }
    with Wire(w.bootstrap) as wire:
        wire.sasl_plain(ADMIN, ADMIN_PASSWORD)
        described = wire.call(describe_req.DescribeAclsRequest(**wanted), DescribeAclsResponse)
        deleted = wire.call(
            delete_req.DeleteAclsRequest(filters=(delete_req.DeleteAclsFilter(**wanted),)),
            DeleteAclsResponse,
        )
    return {
        "describe": (described.error_code.name, described.error_message, len(described.resources)),
        "delete": [
            (
                r.error_code.name,
                r.error_message,
                [(m.error_code.name, m.error_message, m.operation) for m in r.matching_acls],
            )
            for r in deleted.filter_results
        ],
    }


def _invalid_creations(w: _World) -> list[tuple[str, str | None]]:
    """CreateAcls on the wire with what the clients would refuse to send."""

    def creation(rtype: int, name: str, ptype: int, principal: str, op: int) -> Any:
        return create_req.AclCreation(
            resource_type=i8(rtype),
            resource_name=name,
            resource_pattern_type=i8(ptype),
            principal=principal,
            host="*",
            operation=i8(op),
            permission_type=i8(3),
        )

    mine = f"User:{w.user}"
    cases = [
        creation(4, "not-the-cluster", 3, mine, 8),  # CLUSTER is named kafka-cluster
        creation(2, w.topic, 3, w.user, 3),  # a principal without its type
        creation(2, w.topic, 2, mine, 3),  # MATCH is a filter, not a pattern
        creation(2, w.topic, 3, mine, 1),  # ANY is a filter, not an operation
        creation(2, "", 3, mine, 3),  # no resource name
        creation(2, w.topic, 3, mine, 3),  # a good one
    ]
    seen = []
    for case in cases:  # one a request: Kafka fails a whole request for some of them
        with Wire(w.bootstrap) as wire:
            wire.sasl_plain(ADMIN, ADMIN_PASSWORD)
            answer = wire.call(create_req.CreateAclsRequest(creations=(case,)), CreateAclsResponse)
        seen += [
            (r.error_code.name, r.error_message and w.names(r.error_message))
            for r in answer.results
        ]
    return seen


def test_acl_apis(secure_brokers: dict[str, str]) -> None:
    on_bundled, on_kafka = on_both(secure_brokers, acl_apis)
    assert on_kafka["deny_only"] == [
        ("TOPIC", "<topic>", "LITERAL", "User:<user>", "*", "WRITE", "DENY")
    ]
    assert on_bundled == on_kafka


def _blocks(lines: list[str]) -> list[tuple[str, list[str]]]:
    """kafka-acls' output as (heading, its ACL lines) blocks, both sorted: the tool prints
    resources and ACLs in the order of Java sets, which says nothing about the broker."""
    blocks: list[tuple[str, list[str]]] = []
    for line in lines:
        if line.startswith((" \t", "\t")):
            blocks[-1][1].append(line.strip())
        else:
            blocks.append((line.strip(), []))
    return sorted((heading, sorted(acls)) for heading, acls in blocks)


def kafka_acls(bootstrap: str, tmp_path: Path) -> dict[str, Any]:
    w = _World(bootstrap)
    props = tmp_path / "admin.properties"
    props.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{ADMIN}" password="{ADMIN_PASSWORD}";\n'
    )
    common = ["--command-config", str(props)]
    principal = f"User:{w.user}"

    def tool(*args: str) -> tuple[int, list[tuple[str, list[str]]]]:
        result = kafka_tool("kafka-acls", [*common, *args], bootstrap)
        return result.code, _blocks([w.names(line) for line in result.lines])

    return {
        "add_producer": tool(
            "--add", "--allow-principal", principal, "--producer", "--topic", w.topic
        ),
        "add_consumer": tool(
            "--add",
            "--allow-principal",
            principal,
            "--consumer",
            "--topic",
            w.topic,
            "--group",
            w.group,
        ),
        "add_deny": tool(
            "--add",
            "--deny-principal",
            principal,
            "--operation",
            "Delete",
            "--topic",
            w.topic,
            "--resource-pattern-type",
            "prefixed",
        ),
        "list_topic": tool("--list", "--topic", w.topic),
        "list_principal": tool("--list", "--principal", principal),
        "remove": tool(
            "--remove", "--force", "--allow-principal", principal, "--producer", "--topic", w.topic
        ),
        "after_remove": tool("--list", "--principal", principal),
        "produce_after_remove": _produce(w),
        "consume": _consume(w),
    }


def test_kafka_acls(secure_brokers: dict[str, str], tmp_path: Path) -> None:
    on_bundled, on_kafka = on_both(secure_brokers, lambda b: kafka_acls(b, tmp_path))
    assert on_kafka["add_producer"][0] == 0
    assert on_bundled == on_kafka


def test_java_client(
    secure_brokers: dict[str, str], java_client: JavaClient, tmp_path: Path
) -> None:
    """The Java client as a user without ACLs (refused: it may not create the topic), then
    with ALL on the topics the scenario names (`oracle-java-secured-*`, a PREFIXED ACL)."""

    def scenario(bootstrap: str) -> Any:
        w = _World(bootstrap)
        props = tmp_path / "user"
        module = "org.apache.kafka.common.security.scram.ScramLoginModule"
        props.write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
            f'sasl.jaas.config={module} required username="{w.user}" password="{PASSWORD}";\n'
        )
        refused = java_client.run("secured", bootstrap, str(props))["user"]
        w.grant(
            ResourceType.TOPIC,
            "oracle-java-secured-",
            AclOperation.ALL,
            pattern=ResourcePatternType.PREFIXED,
        )
        allowed = java_client.run("secured", bootstrap, str(props))["user"]
        if isinstance(allowed, dict):
            allowed = [r["value"] for r in allowed["read"]["records"]]
        return {"refused": refused, "allowed": allowed}

    on_bundled, on_kafka = on_both(secure_brokers, scenario)
    assert on_kafka["refused"][0] == "TopicAuthorizationException"
    assert on_bundled == on_kafka
