"""The group membership state machine, driven with an explicit clock."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from streams.broker.coordinator.group import Group, GroupState
from streams.broker.coordinator.member import JoinResult, SyncResult


class Answers:
    """Collects the delayed answers of one member's requests."""

    def __init__(self) -> None:
        self.joins: list[JoinResult] = []
        self.syncs: list[SyncResult] = []

    def join_cb(self, result: JoinResult) -> None:
        self.joins.append(result)

    def sync_cb(self, result: SyncResult) -> None:
        self.syncs.append(result)


def join(
    group: Group,
    answers: Answers,
    member_id: str = "",
    *,
    now: int = 0,
    protocols=(("range", b"r"),),
    v4: bool = True,
    session: int = 10_000,
) -> None:
    group.join(
        member_id=member_id,
        group_instance_id=None,
        client_id="c",
        client_host="127.0.0.1",
        session_timeout_ms=session,
        rebalance_timeout_ms=30_000,
        protocol_type="consumer",
        protocols=list(protocols),
        require_known_member_id=v4,
        now_ms=now,
        callback=answers.join_cb,
    )


def joined_member(group: Group, answers: Answers, *, now: int = 0, **kw) -> str:
    """Join with v4 semantics: MEMBER_ID_REQUIRED first, then the real join."""
    join(group, answers, now=now, **kw)
    first = answers.joins.pop()
    assert first.error is ErrorCode.member_id_required
    assert first.member_id
    join(group, answers, first.member_id, now=now, **kw)
    return first.member_id


def test_first_join_requires_member_id_then_single_member_becomes_leader():
    group, a = Group("g"), Answers()
    member = joined_member(group, a)
    (result,) = a.joins
    assert result.error is ErrorCode.none
    assert result.generation_id == 1
    assert result.leader == member
    assert result.protocol_name == "range"
    assert [m[0] for m in result.members] == [member]
    assert group.state is GroupState.COMPLETING_REBALANCE

    group.sync(
        member_id=member, generation_id=1, assignments={member: b"A"}, now_ms=1, callback=a.sync_cb
    )
    assert a.syncs == [SyncResult(ErrorCode.none, b"A", "consumer", "range")]
    assert group.state is GroupState.STABLE


def test_v3_join_assigns_member_id_without_the_extra_round():
    group, a = Group("g"), Answers()
    join(group, a, v4=False)
    (result,) = a.joins
    assert result.error is ErrorCode.none and result.member_id and result.generation_id == 1


def test_second_member_triggers_rebalance_and_both_get_the_new_generation():
    group, a, b = Group("g"), Answers(), Answers()
    m1 = joined_member(group, a)
    group.sync(
        member_id=m1, generation_id=1, assignments={m1: b"all"}, now_ms=0, callback=a.sync_cb
    )
    a.joins.clear()

    m2 = joined_member(group, b, now=10)
    assert group.state is GroupState.PREPARING_REBALANCE
    assert b.joins == []  # waits for m1 to rejoin
    assert (
        group.heartbeat(member_id=m1, generation_id=1, now_ms=20) is ErrorCode.rebalance_in_progress
    )

    join(group, a, m1, now=30)
    assert group.state is GroupState.COMPLETING_REBALANCE
    (ra,), (rb,) = a.joins, b.joins
    assert ra.generation_id == rb.generation_id == 2
    assert ra.leader == rb.leader == m1  # the existing leader keeps leading
    assert {m[0] for m in ra.members} == {m1, m2} and rb.members == ()

    # the follower's sync waits for the leader's assignment
    group.sync(member_id=m2, generation_id=2, assignments={}, now_ms=40, callback=b.sync_cb)
    assert b.syncs == []
    group.sync(
        member_id=m1,
        generation_id=2,
        assignments={m1: b"x", m2: b"y"},
        now_ms=41,
        callback=a.sync_cb,
    )
    assert [s.assignment for s in a.syncs[1:]] == [b"x"]
    assert [s.assignment for s in b.syncs] == [b"y"]
    assert group.state is GroupState.STABLE
    assert group.heartbeat(member_id=m2, generation_id=2, now_ms=50) is ErrorCode.none
    assert group.heartbeat(member_id=m2, generation_id=1, now_ms=50) is ErrorCode.illegal_generation


def test_heartbeat_checks_the_generation_before_the_rebalance_as_kafka_does():
    """A heartbeat of an older generation is ILLEGAL_GENERATION even while a rebalance is
    being prepared, and does not keep the member's session alive."""
    group, a, b = Group("g"), Answers(), Answers()
    m1 = joined_member(group, a, session=1_000)
    group.sync(member_id=m1, generation_id=1, assignments={m1: b"1"}, now_ms=0, callback=a.sync_cb)
    joined_member(group, b, now=10)
    assert group.state is GroupState.PREPARING_REBALANCE
    assert group.heartbeat(member_id=m1, generation_id=0, now_ms=900) is (
        ErrorCode.illegal_generation
    )
    assert group.heartbeat(member_id=m1, generation_id=1, now_ms=20) is (
        ErrorCode.rebalance_in_progress
    )
    group.tick(1_500)  # 1 s after the last heartbeat of its generation, not after the stale one
    assert m1 not in group.members


def test_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout():
    group, a, b = Group("g"), Answers(), Answers()
    m1 = joined_member(group, a, session=60_000)  # alive (session) but never rejoins
    group.sync(member_id=m1, generation_id=1, assignments={}, now_ms=0, callback=a.sync_cb)
    joined_member(group, b, now=100, session=60_000)
    assert group.state is GroupState.PREPARING_REBALANCE
    group.tick(100 + 29_999)
    assert group.state is GroupState.PREPARING_REBALANCE
    group.tick(100 + 30_000)
    assert group.state is GroupState.COMPLETING_REBALANCE
    assert list(group.members) == [b.joins[0].member_id]
    assert b.joins[0].leader == b.joins[0].member_id


def test_session_timeout_expires_a_silent_member_and_rebalances():
    group, a, b = Group("g"), Answers(), Answers()
    m1 = joined_member(group, a, session=6_000)
    m2 = joined_member(group, b, session=6_000)
    join(group, a, m1)
    leader = a.joins[-1].leader
    group.sync(member_id=m1, generation_id=2, assignments={}, now_ms=0, callback=a.sync_cb)
    group.sync(member_id=m2, generation_id=2, assignments={}, now_ms=0, callback=b.sync_cb)
    assert group.state is GroupState.STABLE and leader == m1
    group.heartbeat(member_id=m1, generation_id=2, now_ms=5_000)
    group.tick(6_001)  # m2 silent for more than 6 s
    assert m2 not in group.members
    assert group.state is GroupState.PREPARING_REBALANCE
    join(group, a, m1, now=6_100)
    assert a.joins[-1].generation_id == 3 and group.state is GroupState.COMPLETING_REBALANCE


def test_leave_rebalances_and_last_leave_empties_the_group():
    group, a, b = Group("g"), Answers(), Answers()
    m1 = joined_member(group, a)
    m2 = joined_member(group, b)
    join(group, a, m1)
    group.sync(member_id=m1, generation_id=2, assignments={}, now_ms=0, callback=a.sync_cb)
    assert group.leave(m1, 10) is ErrorCode.none
    assert group.state is GroupState.PREPARING_REBALANCE
    join(group, b, m2, now=20)
    assert b.joins[-1].leader == m2 and b.joins[-1].generation_id == 3
    assert group.leave(m2, 30) is ErrorCode.none
    assert group.state is GroupState.EMPTY and group.is_empty()
    assert group.leave("nobody", 40) is ErrorCode.unknown_member_id


def test_protocol_selection_takes_the_one_all_members_support():
    group, a, b = Group("g"), Answers(), Answers()
    m1 = joined_member(group, a, protocols=(("cooperative-sticky", b"c1"), ("range", b"r1")))
    m2 = joined_member(group, b, protocols=(("range", b"r2"),))
    join(group, a, m1, protocols=(("cooperative-sticky", b"c1"), ("range", b"r1")))
    assert a.joins[-1].protocol_name == b.joins[-1].protocol_name == "range"
    assert dict((m, md) for m, _, md in a.joins[-1].members) == {m1: b"r1", m2: b"r2"}


def test_inconsistent_protocol_is_refused():
    group, a, b = Group("g"), Answers(), Answers()
    joined_member(group, a, protocols=(("range", b""),))
    join(group, b, protocols=(("roundrobin", b""),))
    assert b.joins[-1].error is ErrorCode.inconsistent_group_protocol


def test_sync_errors_unknown_member_and_wrong_generation():
    group, a = Group("g"), Answers()
    m1 = joined_member(group, a)
    group.sync(member_id="who", generation_id=1, assignments={}, now_ms=0, callback=a.sync_cb)
    group.sync(member_id=m1, generation_id=7, assignments={}, now_ms=0, callback=a.sync_cb)
    assert [s.error for s in a.syncs] == [ErrorCode.unknown_member_id, ErrorCode.illegal_generation]


def test_rebalance_during_completing_fails_waiting_syncs():
    group, a, b, c = Group("g"), Answers(), Answers(), Answers()
    m1 = joined_member(group, a)
    m2 = joined_member(group, b)
    join(group, a, m1)
    group.sync(member_id=m2, generation_id=2, assignments={}, now_ms=0, callback=b.sync_cb)
    joined_member(group, c)  # a third member arrives before the leader synced
    assert b.syncs == [SyncResult(ErrorCode.rebalance_in_progress)]
    assert group.state is GroupState.PREPARING_REBALANCE


def test_initial_rebalance_delay_batches_simultaneous_joins():
    group, a, b = Group("g", initial_rebalance_delay_ms=300), Answers(), Answers()
    joined_member(group, a, now=0)
    assert a.joins == []
    joined_member(group, b, now=100)
    assert group.state is GroupState.PREPARING_REBALANCE
    group.tick(299)
    assert a.joins == [] and b.joins == []
    group.tick(300)
    assert a.joins[-1].generation_id == b.joins[-1].generation_id == 1
    assert len(group.members) == 2


class Client:
    """A well-behaved member: remembers its id and generation like a real consumer."""

    def __init__(self, name: str) -> None:
        self.name, self.member_id, self.generation = name, "", -1
        self.answers = Answers()


def _act(group: Group, c: Client, action: str, now: int) -> None:
    """One client's action on the group (a tick when it has no member id to act with)."""
    if action == "join":
        join(group, c.answers, c.member_id, now=now, session=3_000)
        if c.answers.joins and c.answers.joins[-1].error is ErrorCode.member_id_required:
            c.member_id = c.answers.joins[-1].member_id
    elif action == "sync" and c.member_id:
        group.sync(
            member_id=c.member_id,
            generation_id=c.generation,
            now_ms=now,
            callback=c.answers.sync_cb,
            assignments={m: m.encode() for m in group.members},
        )
    elif action == "heartbeat" and c.member_id:
        group.heartbeat(member_id=c.member_id, generation_id=c.generation, now_ms=now)
    elif action == "leave" and c.member_id:
        group.leave(c.member_id, now)
        c.member_id, c.generation = "", -1
    else:
        group.tick(now)


def _check_answers(group: Group, clients: list[Client], leaders: dict[int, str]) -> None:
    """Every answer the clients got is consistent with the group; then they are cleared."""
    for cl in clients:
        for r in cl.answers.joins:
            if r.error is ErrorCode.none:
                cl.member_id, cl.generation = r.member_id, r.generation_id
                assert leaders.setdefault(r.generation_id, r.leader) == r.leader
                assert r.member_id in group.members or r.generation_id < group.generation_id
        cl.answers.joins.clear()
        for s in cl.answers.syncs:
            if s.error is ErrorCode.none:
                assert s.assignment == cl.member_id.encode()  # each member gets its own share
        cl.answers.syncs.clear()


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["join", "sync", "heartbeat", "leave", "tick"]),
            st.integers(0, 3),
            st.integers(0, 4_000),
        ),
        max_size=60,
    )
)
def test_random_member_behaviour_keeps_the_group_consistent(actions):
    group, now = Group("g"), 0
    clients = [Client(f"c{i}") for i in range(4)]
    leaders_by_generation: dict[int, str] = {}
    last_generation = 0
    for action, who, dt in actions:
        now += dt
        _act(group, clients[who], action, now)
        _check_answers(group, clients, leaders_by_generation)
        assert group.generation_id >= last_generation
        last_generation = group.generation_id
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            assert group.members and group.leader_id in group.members
        if group.state is GroupState.EMPTY:
            assert not group.members
        for m in group.members.values():
            assert m.join_callback is None or group.state is GroupState.PREPARING_REBALANCE
            assert m.sync_callback is None or group.state is GroupState.COMPLETING_REBALANCE
