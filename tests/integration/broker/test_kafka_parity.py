"""Produce, Fetch, topic and ApiVersions behaviour matched to Apache Kafka 4.x.

Each test pins a case where the bundled broker used to answer differently from
Kafka (found by another client library's suite run against it); Kafka's own
behaviour is named in the test's docstring.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, Producer
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.response import FetchResponse
from kio.schema.produce.v9.response import ProduceResponse

from tests.support.broker_clients import create_topic
from tests.support.broker_wire import (
    Wire,
    fetch_request,
    produce_partitions_request,
    produce_request,
    record_batch,
)

pytestmark = [pytest.mark.kafka]


def test_compacted_topic_refuses_records_without_a_key(broker, unique) -> None:
    """Kafka's LogValidator: INVALID_RECORD (87), one record error per keyless record,
    and nothing of the batch is appended."""
    topic = unique("compact-keys")
    create_topic(broker.bootstrap, topic, config={"cleanup.policy": "compact"})
    batch = record_batch([b"a", b"b", b"c", b"d"], keys=[b"k1", None, b"k3", None])
    with Wire(broker.bootstrap) as wire:
        refused = wire.call(produce_request(topic, 0, batch), ProduceResponse)
        part = refused.responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.invalid_record
        assert [e.batch_index for e in part.record_errors] == [1, 3]
        assert all(topic in (e.batch_index_error_message or "") for e in part.record_errors)
        assert part.error_message and "2 record errors" in part.error_message
        keyed = record_batch([b"a", b"b"], keys=[b"k1", b"k2"])
        accepted = wire.call(produce_request(topic, 0, keyed), ProduceResponse)
        part = accepted.responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.none and part.base_offset == 0  # nothing landed


def test_compacted_topic_keyless_produce_fails_in_librdkafka(broker, unique) -> None:
    topic = unique("compact-rdkafka")
    create_topic(broker.bootstrap, topic, config={"cleanup.policy": "compact"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "retries": 0})
    errors: list[KafkaError] = []
    producer.produce(topic, value=b"no key", on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(30) == 0
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() == KafkaError.INVALID_RECORD


def test_plain_topic_still_takes_records_without_a_key(broker, unique) -> None:
    topic = unique("delete-keys")
    create_topic(broker.bootstrap, topic)
    with Wire(broker.bootstrap) as wire:
        batch = record_batch([b"a", b"b"], keys=[None, None])
        response = wire.call(produce_request(topic, 0, batch), ProduceResponse)
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.none


def test_fetch_only_the_first_partition_with_data_may_exceed_the_limits(broker, unique) -> None:
    """Kafka's ReplicaManager.readFromLog: `minOneMessage` holds until a partition returned
    data; later partitions stay within partition_max_bytes and the rest of max_bytes."""
    topic = unique("fetch-limits")
    create_topic(broker.bootstrap, topic, partitions=3)
    batch = record_batch([b"v" * 1000] * 10)
    one = len(batch)
    with Wire(broker.bootstrap) as wire:
        for p in (0, 1, 2):
            for _ in range(2):
                response = wire.call(produce_request(topic, p, batch), ProduceResponse)
                assert response.responses[0].partition_responses[0].error_code == ErrorCode.none

        # the response budget: 1.5 batches; partition 0 takes one, nothing else fits
        budget = wire.call(
            fetch_request(topic, [0, 1, 2], max_bytes=one + one // 2, partition_max_bytes=1 << 20),
            FetchResponse,
        )
        sizes = [len(p.records) for p in budget.responses[0].partitions]
        assert sizes == [one, 0, 0]
        assert sum(sizes) <= one + one // 2

        # the per-partition limit below one batch: only the first partition gets one
        per_partition = wire.call(
            fetch_request(topic, [0, 1, 2], max_bytes=1 << 20, partition_max_bytes=100),
            FetchResponse,
        )
        assert [len(p.records) for p in per_partition.responses[0].partitions] == [one, 0, 0]

        # an unknown partition first does not spend the oversized allowance
        first_missing = wire.call(
            fetch_request(topic, [7, 1, 2], max_bytes=1 << 20, partition_max_bytes=100),
            FetchResponse,
        )
        parts = first_missing.responses[0].partitions
        assert parts[0].error_code == ErrorCode.unknown_topic_or_partition
        assert [len(p.records) for p in parts[1:]] == [one, 0]


def test_both_clients_negotiate_with_api_versions_v4_advertised(broker, unique) -> None:
    """ApiVersions v4 is served; librdkafka and kafka-python still agree on versions."""
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaAdminClient

    topic = unique("negotiate")
    create_topic(broker.bootstrap, topic)
    metadata = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    assert topic in metadata.topics
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        assert topic in admin.list_topics()
    finally:
        admin.close()


def _create_error(admin, new_topic) -> KafkaError | None:
    from confluent_kafka import KafkaException

    try:
        admin.create_topics([new_topic])[new_topic.topic].result(timeout=30)
    except KafkaException as e:
        return e.args[0]
    return None


def test_create_topics_takes_an_assignment_naming_this_node(broker, unique) -> None:
    """Kafka's controller accepts a manual assignment of registered brokers and refuses
    an unknown broker id with INVALID_REPLICA_ASSIGNMENT (a one-node cluster: node 0)."""
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = unique("assigned")
    assert (
        _create_error(admin, NewTopic(topic, num_partitions=2, replica_assignment=[[0], [0]]))
        is None
    )
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 2

    for bad in ([[1]], [[0, 0]], [[0], [0, 0]]):
        error = _create_error(
            admin, NewTopic(unique("refused"), num_partitions=len(bad), replica_assignment=bad)
        )
        assert error is not None and error.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT, bad

    more = admin.create_partitions([NewPartitions(topic, 3, replica_assignment=[[0]])])
    more[topic].result(timeout=30)
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 3
    from confluent_kafka import KafkaException

    refused = admin.create_partitions([NewPartitions(topic, 4, replica_assignment=[[5]])])
    with pytest.raises(KafkaException) as info:
        refused[topic].result(timeout=30)
    assert info.value.args[0].code() == KafkaError.INVALID_REPLICA_ASSIGNMENT


def test_compression_type_is_a_known_topic_config(broker, unique) -> None:
    """Kafka's topic config `compression.type`: default `producer`, set at creation and
    by AlterConfigs, described back; an unknown codec is INVALID_CONFIG."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewTopic,
    )

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    def described(topic: str) -> str:
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        return (
            admin.describe_configs([resource])[resource]
            .result(timeout=30)["compression.type"]
            .value
        )

    plain, zstd = unique("codec-default"), unique("codec-zstd")
    create_topic(broker.bootstrap, plain)
    create_topic(broker.bootstrap, zstd, config={"compression.type": "zstd"})
    assert described(plain) == "producer"
    assert described(zstd) == "zstd"

    error = _create_error(
        admin, NewTopic(unique("codec-bad"), 1, config={"compression.type": "brotli"})
    )
    assert error is not None and error.code() == KafkaError.INVALID_CONFIG

    def set_codec(value: str):
        change = ConfigResource(
            ConfigResource.Type.TOPIC,
            plain,
            incremental_configs=[
                ConfigEntry("compression.type", value, incremental_operation=AlterConfigOpType.SET)
            ],
        )
        return admin.incremental_alter_configs([change])[change]

    set_codec("lz4").result(timeout=30)
    assert described(plain) == "lz4"
    with pytest.raises(KafkaException) as info:
        set_codec("LZ4").result(timeout=30)  # Kafka's validator is case-sensitive
    assert info.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert described(plain) == "lz4"


def test_legacy_alter_configs_replaces_the_whole_set(broker, unique) -> None:
    """Kafka's AlterConfigs (key 33): the named configs become the topic's overrides,
    every override not named returns to its default."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = unique("legacy-alter")
    create_topic(broker.bootstrap, topic, config={"retention.ms": "86400000"})

    def described() -> dict[str, str]:
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        entries = admin.describe_configs([resource])[resource].result(timeout=30)
        return {k: e.value for k, e in entries.items()}

    change = ConfigResource(
        ConfigResource.Type.TOPIC, topic, set_config={"cleanup.policy": "compact"}
    )
    admin.alter_configs([change])[change].result(timeout=30)
    after = described()
    assert after["cleanup.policy"] == "compact"
    assert after["retention.ms"] == str(7 * 24 * 3600 * 1000)  # back to the default

    bad = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={"no.such.key": "1"})
    from confluent_kafka import KafkaException

    with pytest.raises(KafkaException) as info:
        admin.alter_configs([bad])[bad].result(timeout=30)
    assert info.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert described()["cleanup.policy"] == "compact"


def test_acl_apis_answer_as_a_broker_without_an_authorizer(broker) -> None:
    """Kafka without `authorizer.class.name`: SECURITY_DISABLED (54) for every ACL API."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    binding = AclBinding(
        ResourceType.TOPIC,
        "t",
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    match_all = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    calls = [  # librdkafka reports DescribeAcls' error as an empty list: checked on the wire
        lambda: admin.create_acls([binding])[binding].result(timeout=30),
        lambda: admin.delete_acls([match_all])[match_all].result(timeout=30),
    ]
    for call in calls:
        with pytest.raises(KafkaException) as info:
            call()
        assert info.value.args[0].code() == KafkaError.SECURITY_DISABLED

    from kio.schema.describe_acls.v3.request import DescribeAclsRequest
    from kio.schema.describe_acls.v3.response import DescribeAclsResponse

    request = DescribeAclsRequest(
        resource_type_filter=1,  # ANY
        resource_name_filter=None,
        pattern_type_filter=1,  # ANY
        principal_filter=None,
        host_filter=None,
        operation=1,  # ANY
        permission_type=1,  # ANY
    )
    with Wire(broker.bootstrap) as wire:
        described = wire.call(request, DescribeAclsResponse)
    assert described.error_code == ErrorCode.security_disabled
    assert described.error_message == "No Authorizer is configured."
    assert described.resources == ()


def test_produce_takes_exactly_one_record_batch_per_partition(broker, unique) -> None:
    """Kafka's ProduceRequest.validateRecords (checked by KafkaApis for Produce v3+):
    INVALID_RECORD (87) for a partition whose records are two batches, no batch, or a
    batch of an older magic; nothing of them is appended, the request's other partitions are."""
    topic = unique("one-batch")
    create_topic(broker.bootstrap, topic, partitions=2)
    first, second = record_batch([b"a", b"b"]), record_batch([b"c"])
    old_magic = bytearray(first)
    old_magic[16] = 1  # the magic byte; the CRC does not cover it
    with Wire(broker.bootstrap) as wire:
        for records in (first + second, b"", bytes(old_magic)):
            request = produce_partitions_request(topic, {0: records, 1: second})
            response = wire.call(request, ProduceResponse)
            refused, accepted = response.responses[0].partition_responses
            assert (refused.index, refused.error_code, refused.base_offset) == (
                0,
                ErrorCode.invalid_record,
                -1,
            )
            assert refused.error_message and "record batch" in refused.error_message
            assert (accepted.index, accepted.error_code) == (1, ErrorCode.none)
        one = wire.call(produce_request(topic, 0, first), ProduceResponse)
        part = one.responses[0].partition_responses[0]
        assert (part.error_code, part.base_offset) == (ErrorCode.none, 0)  # nothing landed
        fetched = wire.call(
            fetch_request(topic, [0, 1], max_bytes=1 << 20, partition_max_bytes=1 << 20),
            FetchResponse,
        )
    assert [p.high_watermark for p in fetched.responses[0].partitions] == [2, 3]
