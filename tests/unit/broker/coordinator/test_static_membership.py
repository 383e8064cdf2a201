"""KIP-345 static membership in the group state machine, as Kafka's classic coordinator
answers it: a restarted ``group.instance.id`` takes its old place (and assignment)
without a rebalance of a Stable group, and its old member id is fenced."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from streams.broker.coordinator.group import Group, GroupState
from streams.broker.coordinator.groups import GroupCoordinator
from streams.broker.coordinator.member import JoinResult, SyncResult
from tests.unit.broker.coordinator.test_group import Answers, join, joined_member

RANGE = (("range", b"r"),)


def static_join(
    group: Group,
    answers: Answers,
    instance: str,
    member_id: str = "",
    *,
    now: int = 0,
    protocols=RANGE,
    session: int = 10_000,
) -> None:
    group.join(
        member_id=member_id,
        group_instance_id=instance,
        client_id="c",
        client_host="h",
        session_timeout_ms=session,
        rebalance_timeout_ms=30_000,
        protocol_type="consumer",
        protocols=list(protocols),
        require_known_member_id=True,
        now_ms=now,
        callback=answers.join_cb,
    )


def stable_pair(
    group: Group, a: Answers, b: Answers, *, protocols=RANGE, session: int = 10_000
) -> tuple[str, str]:
    """Static member `inst-a` (the leader) and a dynamic member, Stable in generation 2
    with assignments `A` and `B`."""
    static_join(group, a, "inst-a", protocols=protocols, session=session)
    old_a = a.joins[-1].member_id
    assert a.joins[-1].error is ErrorCode.none  # no MEMBER_ID_REQUIRED round for static members
    m_b = joined_member(group, b, protocols=protocols)
    static_join(group, a, "inst-a", old_a, protocols=protocols, session=session)
    assert a.joins[-1].leader == old_a and a.joins[-1].generation_id == 2
    group.sync(member_id=m_b, generation_id=2, assignments={}, now_ms=0, callback=b.sync_cb)
    group.sync(
        member_id=old_a,
        generation_id=2,
        assignments={old_a: b"A", m_b: b"B"},
        now_ms=0,
        callback=a.sync_cb,
        group_instance_id="inst-a",
    )
    assert group.state is GroupState.STABLE
    return old_a, m_b


def test_restarted_static_member_gets_its_assignment_back_without_a_rebalance():
    group, a, b, a2 = Group("g"), Answers(), Answers(), Answers()
    old_a, m_b = stable_pair(group, a, b)
    b_joins = list(b.joins)

    static_join(group, a2, "inst-a", now=5)  # restarted without a LeaveGroup
    new_a = a2.joins[-1].member_id
    assert new_a != old_a
    # the current generation, and the old leader id so that it does not run the assignor
    assert a2.joins[-1] == JoinResult(
        ErrorCode.none,
        new_a,
        generation_id=2,
        protocol_type="consumer",
        protocol_name="range",
        leader=old_a,
    )
    assert group.state is GroupState.STABLE and group.generation_id == 2
    assert set(group.members) == {new_a, m_b} and group.leader_id == new_a
    assert b.joins == b_joins
    assert group.heartbeat(member_id=m_b, generation_id=2, now_ms=6) is ErrorCode.none

    group.sync(
        member_id=new_a,
        generation_id=2,
        assignments={},
        now_ms=7,
        callback=a2.sync_cb,
        group_instance_id="inst-a",
    )
    assert a2.syncs == [SyncResult(ErrorCode.none, b"A", "consumer", "range")]


def test_the_old_member_id_of_a_restarted_instance_is_fenced():
    group, a, b, a2 = Group("g"), Answers(), Answers(), Answers()
    old_a, _ = stable_pair(group, a, b)
    static_join(group, a2, "inst-a", now=5)
    new_a = a2.joins[-1].member_id

    beat = group.heartbeat(member_id=old_a, generation_id=2, now_ms=6, group_instance_id="inst-a")
    assert beat is ErrorCode.fenced_instance_id
    # without the instance id the old member id is simply unknown, as in Kafka
    assert group.heartbeat(member_id=old_a, generation_id=2, now_ms=6) is (
        ErrorCode.unknown_member_id
    )
    group.sync(
        member_id=old_a,
        generation_id=2,
        assignments={},
        now_ms=6,
        callback=a.sync_cb,
        group_instance_id="inst-a",
    )
    assert a.syncs[-1] == SyncResult(ErrorCode.fenced_instance_id)
    static_join(group, a, "inst-a", old_a, now=6)
    assert a.joins[-1].error is ErrorCode.fenced_instance_id
    assert group.leave(old_a, 6, "inst-a") is ErrorCode.fenced_instance_id
    assert group.heartbeat(member_id=new_a, generation_id=2, now_ms=6, group_instance_id="x") is (
        ErrorCode.unknown_member_id
    )
    assert new_a in group.members and old_a not in group.members
    assert group.state is GroupState.STABLE


def test_offset_commit_of_a_fenced_incarnation_is_refused():
    groups = GroupCoordinator(None)
    group = groups.get_or_create("g")
    a, b, a2 = Answers(), Answers(), Answers()
    old_a, _ = stable_pair(group, a, b)
    static_join(group, a2, "inst-a", now=5)
    new_a = a2.joins[-1].member_id
    assert groups.validate_commit("g", old_a, 2, group_instance_id="inst-a") is (
        ErrorCode.fenced_instance_id
    )
    assert groups.validate_commit("g", new_a, 2, group_instance_id="inst-a") is ErrorCode.none


def test_restart_while_the_leader_assigns_starts_a_new_rebalance():
    """Kafka rebalances a CompletingRebalance group: the leader may be assigning to the
    old member id, which the new incarnation would never receive."""
    group, a, b, a2 = Group("g"), Answers(), Answers(), Answers()
    static_join(group, a, "inst-a")
    old_a = a.joins[-1].member_id
    m_b = joined_member(group, b)
    static_join(group, a, "inst-a", old_a)
    assert group.state is GroupState.COMPLETING_REBALANCE
    # the follower waits in SyncGroup; the leader's has not arrived
    group.sync(member_id=m_b, generation_id=2, assignments={}, now_ms=0, callback=b.sync_cb)

    static_join(group, a2, "inst-a", now=1)
    assert group.state is GroupState.PREPARING_REBALANCE
    assert b.syncs == [SyncResult(ErrorCode.rebalance_in_progress)]
    join(group, b, m_b, now=2)
    new_a = a2.joins[-1].member_id
    assert a2.joins[-1].generation_id == 3 and a2.joins[-1].leader == new_a
    assert set(group.members) == {new_a, m_b}


def test_restart_with_a_protocol_change_rebalances():
    both = (("range", b"r"), ("roundrobin", b"rr"))
    group, a, b, a2 = Group("g"), Answers(), Answers(), Answers()
    stable_pair(group, a, b, protocols=both)
    assert group.protocol_name == "range"
    static_join(group, a2, "inst-a", now=5, protocols=tuple(reversed(both)))
    assert group.state is GroupState.PREPARING_REBALANCE and a2.joins == []


def test_a_static_member_that_does_not_rejoin_keeps_its_place_until_its_session_ends():
    group, a, b, c = Group("g"), Answers(), Answers(), Answers()
    old_a, m_b = stable_pair(group, a, b, session=60_000)  # a session beyond the rebalance
    m_c = joined_member(group, c, now=10)  # a third member: rebalance; `inst-a` is down
    join(group, b, m_b, now=20)
    assert group.state is GroupState.PREPARING_REBALANCE  # waits for the static member
    group.tick(10 + 30_000)  # the rebalance timeout
    assert set(group.members) == {old_a, m_b, m_c}
    assert group.generation_id == 3 and group.leader_id in (m_b, m_c)
    assert b.joins[-1].generation_id == c.joins[-1].generation_id == 3
    assert a.joins[-1].generation_id == 2  # nothing was answered to the absent member

    now = 10 + 30_000
    for t in range(now + 5_000, now + 60_001, 5_000):
        group.heartbeat(member_id=m_b, generation_id=3, now_ms=t)
        group.heartbeat(member_id=m_c, generation_id=3, now_ms=t)
    group.tick(now + 59_999)
    assert old_a in group.members
    group.tick(now + 60_001)  # the static member's session timeout
    assert set(group.members) == {m_b, m_c}
    assert group.state is GroupState.PREPARING_REBALANCE


def test_leave_group_by_instance_id():
    group, a, b = Group("g"), Answers(), Answers()
    old_a, m_b = stable_pair(group, a, b)
    assert group.leave("", 1, "nobody") is ErrorCode.unknown_member_id
    assert group.leave("", 1, None) is ErrorCode.unknown_member_id
    assert group.leave("", 1, "inst-a") is ErrorCode.none
    assert set(group.members) == {m_b}


def test_leave_group_by_member_id_alone_removes_a_static_member():
    """Kafka's handleLeaveGroup validates a member id without an instance id as any
    member's: the static member leaves (a static consumer's close just does not send it)."""
    group, a, b = Group("g"), Answers(), Answers()
    old_a, m_b = stable_pair(group, a, b)
    assert group.leave(old_a, 1) is ErrorCode.none
    assert set(group.members) == {m_b}
