"""Protocol-level answers to odd coordinator requests: an error in the response, never a hang."""

from __future__ import annotations

from datetime import timedelta

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest
from kio.schema.find_coordinator.v3.response import FindCoordinatorResponse
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.heartbeat.v4.response import HeartbeatResponse
from kio.schema.join_group.v7.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.join_group.v7.response import JoinGroupResponse
from kio.schema.offset_fetch.v1.request import OffsetFetchRequest as OffsetFetchRequestV1
from kio.schema.offset_fetch.v1.request import OffsetFetchRequestTopic as OffsetFetchTopicV1
from kio.schema.offset_fetch.v1.response import OffsetFetchResponse as OffsetFetchResponseV1
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

from tests.support.broker_wire import Wire

pytestmark = pytest.mark.kafka


def _join(
    group: str, session_ms: int, protocols: tuple = (("range", b""),), member_id: str = ""
) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=group,
        session_timeout=timedelta(milliseconds=session_ms),
        rebalance_timeout=timedelta(seconds=5),
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=tuple(JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols),
    )


def test_coordinator_lookups_and_group_errors_are_answered_in_the_response(broker, unique):
    group = unique("g")
    with Wire(broker.bootstrap) as c:
        for key_type in (0, 1):
            resp = c.call(
                FindCoordinatorRequest(key=group, key_type=key_type), FindCoordinatorResponse
            )
            assert (resp.error_code, resp.port) == (ErrorCode.none, broker.port)
        bad = c.call(FindCoordinatorRequest(key=group, key_type=7), FindCoordinatorResponse)
        assert bad.error_code is ErrorCode.invalid_request

        assert (
            c.call(_join(group, 10), JoinGroupResponse).error_code
            is ErrorCode.invalid_session_timeout
        )
        assert c.call(_join("", 10_000), JoinGroupResponse).error_code is ErrorCode.invalid_group_id
        assert (
            c.call(_join(group, 10_000, ()), JoinGroupResponse).error_code
            is ErrorCode.inconsistent_group_protocol
        )
        assert (
            c.call(_join(group, 10_000, member_id="ghost"), JoinGroupResponse).error_code
            is ErrorCode.unknown_member_id
        )

        first = c.call(_join(group, 10_000), JoinGroupResponse)
        assert first.error_code is ErrorCode.member_id_required and first.member_id
        joined = c.call(_join(group, 10_000, member_id=first.member_id), JoinGroupResponse)
        assert (joined.error_code, joined.generation_id, joined.leader) == (
            ErrorCode.none,
            1,
            first.member_id,
        )
        other = c.call(_join(group, 10_000, (("roundrobin", b""),)), JoinGroupResponse)
        assert other.error_code is ErrorCode.inconsistent_group_protocol

        beat = c.call(
            HeartbeatRequest(
                group_id=group, generation_id=1, member_id="ghost", group_instance_id=None
            ),
            HeartbeatResponse,
        )
        assert beat.error_code is ErrorCode.unknown_member_id

        fetched = c.call(
            OffsetFetchRequestV1(
                group_id=unique("nobody"),
                topics=(OffsetFetchTopicV1(name="t", partition_indexes=(0, 1)),),
            ),
            OffsetFetchResponseV1,
        )
        parts = fetched.topics[0].partitions
        assert [(p.partition_index, p.committed_offset, p.error_code) for p in parts] == [
            (0, -1, ErrorCode.none),
            (1, -1, ErrorCode.none),
        ]

        # SASL is off on this broker: a handshake is refused, the connection still works
        hs = c.call(SaslHandshakeRequest(mechanism="PLAIN"), SaslHandshakeResponse)
        assert hs.error_code is ErrorCode.illegal_sasl_state
        assert (
            c.call(
                FindCoordinatorRequest(key=group, key_type=0), FindCoordinatorResponse
            ).error_code
            is ErrorCode.none
        )
