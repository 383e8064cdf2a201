"""The ACL authorizer on a real broker process, switched on with Kafka's settings, with real
clients: what a principal without ACLs is refused (produce, consume, groups, topic admin,
configs, transactions, markers), what the ACLs created with the Admin API and Kafka's own
`kafka-acls` then allow, DENY over ALLOW, prefixed and wildcard patterns, super users,
`allow.everyone.if.no.acl.found`, and ACLs that survive a restart. librdkafka's own tests
0115 (producer) and 0119 (consumer) check the same refusals against Kafka.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kio.schema.describe_acls.v3 import request as describe_acls_req
from kio.schema.describe_acls.v3.response import DescribeAclsResponse
from kio.schema.write_txn_markers.v1 import request as markers_req
from kio.schema.write_txn_markers.v1.response import WriteTxnMarkersResponse
from kio.static.primitive import i8, i16, i32, i64

from tests.support.broker_wire import Wire
from tests.support.kafka_tools import run as kafka_tool

pytestmark = pytest.mark.kafka

PASSWORDS = {"admin": "admin-acl-pw-11", "bob": "bob-acl-pw-22", "carol": "carol-acl-pw-33"}
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def _config(**extra: str) -> dict[str, str]:
    return {
        "sasl.users": ",".join(f"{u}:{p}" for u, p in PASSWORDS.items()),
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:admin",
        **extra,
    }


def _conf(user: str) -> dict[str, Any]:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": PASSWORDS[user],
        "log_level": 0,
    }


def _admin(bootstrap: str, user: str = "admin") -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, **_conf(user)})


def _acl(
    name: str,
    principal: str,
    operation: AclOperation,
    *,
    rtype: ResourceType = ResourceType.TOPIC,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
    permission: AclPermissionType = AclPermissionType.ALLOW,
) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, "*", operation, permission)


def _grant(admin: AdminClient, *acls: AclBinding) -> None:
    for future in admin.create_acls(list(acls)).values():
        future.result(30)


def _produce(bootstrap: str, user: str, topic: str, **extra: Any) -> KafkaError | None:
    """The error of one produced record (None when it was written)."""
    seen: list[KafkaError | None] = []
    p = Producer(
        {"bootstrap.servers": bootstrap, "message.timeout.ms": 10000, **_conf(user), **extra}
    )
    p.produce(topic, value=b"v", partition=0, on_delivery=lambda err, _msg: seen.append(err))
    p.flush(20)
    assert seen, "no delivery report"
    return seen[0]


def _consume(bootstrap: str, user: str, topic: str, group: str) -> tuple[Any, ...]:
    """(first error or None, values read) of a group consumer that commits what it read."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **_conf(user),
        }
    )
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            msg = c.poll(1)
            if msg is None:
                continue
            if msg.error() is not None:
                return msg.error().code(), []
            try:
                c.commit(msg, asynchronous=False)
            except KafkaException as e:
                return e.args[0].code(), [msg.value()]
            return None, [msg.value()]
        return "timeout", []
    finally:
        c.close()


def _create_topic(admin: AdminClient, topic: str) -> None:
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)


def test_a_principal_without_acls_is_refused_and_acls_let_it_in(broker_factory, unique) -> None:
    broker = broker_factory(**_config())
    admin = _admin(broker.bootstrap)
    topic, group = unique("acl"), unique("acl-group")
    _create_topic(admin, topic)
    assert _produce(broker.bootstrap, "admin", topic) is None  # a super user may do anything

    # bob, with no ACL (allow.everyone.if.no.acl.found is false): librdkafka 0115 and 0119
    assert _produce(broker.bootstrap, "bob", topic).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _consume(broker.bootstrap, "bob", topic, group)[0] in (
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
    )
    bob = _admin(broker.bootstrap, "bob")
    assert topic not in bob.list_topics(timeout=30).topics  # not even listed
    other = unique("acl-bob-creates")
    with pytest.raises(KafkaException) as refused:
        _create_topic(bob, other)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    with pytest.raises(KafkaException) as refused:
        bob.describe_configs([resource])[resource].result(30)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # DescribeAcls takes DESCRIBE on the cluster (librdkafka hands a refusal back as an empty
    # list, so the answer is read on the wire)
    describe = describe_acls_req.DescribeAclsRequest(
        resource_type_filter=i8(1),
        resource_name_filter=None,
        pattern_type_filter=i8(1),
        principal_filter=None,
        host_filter=None,
        operation=i8(1),
        permission_type=i8(1),
    )
    with Wire(broker.bootstrap) as w:
        w.sasl_plain("bob", PASSWORDS["bob"])
        answer = w.call(describe, DescribeAclsResponse)
    assert answer.error_code.name == "cluster_authorization_failed"

    # WRITE lets bob produce; READ on the topic and on the group lets him consume and commit
    _grant(admin, _acl(topic, "User:bob", AclOperation.WRITE))
    assert _produce(broker.bootstrap, "bob", topic) is None
    _grant(admin, _acl(topic, "User:bob", AclOperation.READ))
    assert (
        _consume(broker.bootstrap, "bob", topic, group)[0] == KafkaError.GROUP_AUTHORIZATION_FAILED
    )
    _grant(admin, _acl(group, "User:bob", AclOperation.READ, rtype=ResourceType.GROUP))
    assert _consume(broker.bootstrap, "bob", topic, group) == (None, [b"v"])
    assert topic in bob.list_topics(timeout=30).topics  # READ implies DESCRIBE
    # carol has none of bob's ACLs
    assert (
        _produce(broker.bootstrap, "carol", topic).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    )


def test_deny_wins_prefixes_and_wildcards_match(broker_factory, unique) -> None:
    broker = broker_factory(**_config())
    admin = _admin(broker.bootstrap)
    prefix = unique("team-a") + "."
    orders, payments = prefix + "orders", prefix + "payments"
    for t in (orders, payments):
        _create_topic(admin, t)
    _grant(
        admin,
        _acl(prefix, "User:bob", AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED),
        _acl(payments, "User:bob", AclOperation.WRITE, permission=AclPermissionType.DENY),
        _acl("*", "User:*", AclOperation.WRITE),
    )
    assert _produce(broker.bootstrap, "bob", orders) is None
    assert (
        _produce(broker.bootstrap, "bob", payments).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    )
    assert _produce(broker.bootstrap, "carol", orders) is None  # the wildcard ACL
    assert _produce(broker.bootstrap, "carol", payments) is None  # the DENY is bob's only

    deleted = admin.delete_acls(
        [
            AclBindingFilter(
                ResourceType.TOPIC,
                "*",
                ResourcePatternType.LITERAL,
                None,
                None,
                AclOperation.ANY,
                AclPermissionType.ANY,
            )
        ]
    )
    assert [len(f.result(30)) for f in deleted.values()] == [1]
    assert (
        _produce(broker.bootstrap, "carol", orders).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    )


def test_allow_everyone_if_no_acl_found(broker_factory, unique) -> None:
    broker = broker_factory(**_config(**{"allow.everyone.if.no.acl.found": "true"}))
    admin = _admin(broker.bootstrap)
    free, guarded = unique("free"), unique("guarded")
    for t in (free, guarded):
        _create_topic(admin, t)
    _grant(admin, _acl(guarded, "User:carol", AclOperation.WRITE))
    assert _produce(broker.bootstrap, "bob", free) is None  # no ACL on it: everyone
    assert (
        _produce(broker.bootstrap, "bob", guarded).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    )
    assert _produce(broker.bootstrap, "carol", guarded) is None


def test_transactions_need_write_on_the_transactional_id(broker_factory, unique) -> None:
    broker = broker_factory(**_config())
    admin = _admin(broker.bootstrap)
    topic, txn = unique("acl-txn"), unique("txn-id")
    _create_topic(admin, topic)
    _grant(admin, _acl(topic, "User:bob", AclOperation.WRITE))

    def init(user: str) -> Any:
        p = Producer(
            {"bootstrap.servers": broker.bootstrap, "transactional.id": txn, **_conf(user)}
        )
        try:
            p.init_transactions(20)
        except KafkaException as e:
            return e.args[0].code()
        p.begin_transaction()
        p.produce(topic, value=b"in a transaction", partition=0)
        p.commit_transaction(20)
        return None

    assert init("bob") == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    _grant(admin, _acl(txn, "User:bob", AclOperation.WRITE, rtype=ResourceType.TRANSACTIONAL_ID))
    assert init("bob") is None


def test_write_txn_markers_needs_cluster_action(broker_factory, unique) -> None:
    """Kafka lets only brokers (CLUSTER_ACTION on the cluster) write transaction markers."""
    broker = broker_factory(**_config())
    admin = _admin(broker.bootstrap)
    topic = unique("acl-markers")
    _create_topic(admin, topic)
    _grant(admin, _acl(topic, "User:bob", AclOperation.ALL))
    request = markers_req.WriteTxnMarkersRequest(
        markers=(
            markers_req.WritableTxnMarker(
                producer_id=i64(1),
                producer_epoch=i16(0),
                transaction_result=False,
                topics=(
                    markers_req.WritableTxnMarkerTopic(name=topic, partition_indexes=(i32(0),)),
                ),
                coordinator_epoch=i32(0),
            ),
        )
    )
    with Wire(broker.bootstrap) as w:
        w.sasl_plain("bob", PASSWORDS["bob"])
        answer = w.call(request, WriteTxnMarkersResponse)
    codes = [p.error_code.name for m in answer.markers for t in m.topics for p in t.partitions]
    assert codes == ["cluster_authorization_failed"]


def test_kafka_acls_manages_acls_that_survive_a_restart(
    broker_factory, tmp_path: Path, unique
) -> None:
    data_dir = tmp_path / "data"
    broker = broker_factory(data_dir, **_config())
    topic = unique("acl-tool")
    admin = _admin(broker.bootstrap)
    _create_topic(admin, topic)
    props = tmp_path / "admin.properties"
    props.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="admin" password="{PASSWORDS["admin"]}";\n'
    )
    common = ["--command-config", str(props)]
    added = kafka_tool(
        "kafka-acls",
        [*common, "--add", "--allow-principal", "User:bob", "--producer", "--topic", topic],
        broker.bootstrap,
    )
    assert added.code == 0, added.explain()
    listed = kafka_tool("kafka-acls", [*common, "--list", "--topic", topic], broker.bootstrap)
    assert listed.code == 0, listed.explain()
    assert (
        f"ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)" in listed.stdout
    )
    for op in ("WRITE", "DESCRIBE", "CREATE"):
        assert (
            f"(principal=User:bob, host=*, operation={op}, permissionType=ALLOW)" in listed.stdout
        )
    broker.stop()

    broker = broker_factory(data_dir, **_config())
    assert _produce(broker.bootstrap, "bob", topic) is None
    removed = kafka_tool(
        "kafka-acls",
        [
            *common,
            "--remove",
            "--force",
            "--allow-principal",
            "User:bob",
            "--producer",
            "--topic",
            topic,
        ],
        broker.bootstrap,
    )
    assert removed.code == 0, removed.explain()
    assert _produce(broker.bootstrap, "bob", topic).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_without_an_authorizer_the_acl_apis_are_disabled(broker_factory) -> None:
    broker = broker_factory(**{"sasl.users": f"bob:{PASSWORDS['bob']}"})
    bob = _admin(broker.bootstrap, "bob")
    with pytest.raises(KafkaException) as refused:
        _grant(bob, _acl("t", "User:bob", AclOperation.WRITE))
    assert refused.value.args[0].code() == KafkaError.SECURITY_DISABLED


def test_a_bad_authorizer_setting_stops_the_broker(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "streams.broker", "--data-dir", str(tmp_path), "--port", "0"]
        + ["--config-stdin"],
        input=json.dumps({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert "authorizer.class.name" in result.stderr and AUTHORIZER in result.stderr
