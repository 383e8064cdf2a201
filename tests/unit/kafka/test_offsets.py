"""Offset arithmetic of the Kafka source: JSON form, starting offsets, admission
control and range splitting (pure functions, no broker, no Spark)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.kafka.errors import KafkaConfigError
from streams.kafka.offsets import (
    OffsetRange,
    cap_at,
    from_json_dict,
    pack_ranges,
    parse_starting_offsets,
    rate_limit,
    resolve_start,
    rewound,
    rounds,
    split_ranges,
    to_json_dict,
)


def test_json_form_uses_string_partitions_and_round_trips() -> None:
    offsets = {("b", 1): 7, ("a", 0): 42, ("a", 10): 3}
    as_json = to_json_dict(offsets)
    assert as_json == {"a": {"0": 42, "10": 3}, "b": {"1": 7}}
    assert from_json_dict(as_json) == offsets


def test_malformed_offsets_name_topic_and_partition() -> None:
    with pytest.raises(KafkaConfigError, match="topic `orders` partition `0`"):
        from_json_dict({"orders": {"0": "soon"}})


@pytest.mark.parametrize("text", ["earliest", "LATEST", " earliest "])
def test_named_starting_offsets(text: str) -> None:
    assert parse_starting_offsets(text).mode == text.strip().lower()


def test_explicit_starting_offsets_from_json_text_and_mapping() -> None:
    a = parse_starting_offsets('{"orders": {"0": 5, "1": -2}}')
    b = parse_starting_offsets({"orders": {"0": 5, "1": -2}})
    assert a == b
    assert a.mode == "explicit" and a.explicit == {("orders", 0): 5, ("orders", 1): -2}


def test_bad_starting_offsets_message_says_what_is_accepted() -> None:
    with pytest.raises(KafkaConfigError, match="neither `earliest`, `latest` nor JSON"):
        parse_starting_offsets("first")


def test_resolve_start_explicit_with_sentinels_and_unnamed_partitions() -> None:
    low = {("t", 0): 10, ("t", 1): 0, ("t", 2): 5}
    high = {("t", 0): 100, ("t", 1): 50, ("t", 2): 9}
    spec = parse_starting_offsets({"t": {"0": 20, "1": -1}})
    assert resolve_start(spec, low, high) == {("t", 0): 20, ("t", 1): 50, ("t", 2): 5}
    assert resolve_start(parse_starting_offsets("latest"), low, high) == high
    assert resolve_start(parse_starting_offsets("earliest"), low, high) == low


def test_rate_limit_is_proportional_and_exact() -> None:
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 100}
    end = {("t", 0): 300, ("t", 1): 100, ("t", 2): 100}
    capped = rate_limit(start, end, 100)
    assert capped == {("t", 0): 75, ("t", 1): 25, ("t", 2): 100}


def test_rate_limit_does_not_starve_small_partitions() -> None:
    start = {("t", 0): 0, ("t", 1): 0}
    end = {("t", 0): 10_000, ("t", 1): 3}
    capped = rate_limit(start, end, 10)
    assert capped[("t", 1)] >= 1
    assert sum(capped[tp] - start[tp] for tp in start) == 10


def test_rate_limit_under_budget_returns_end() -> None:
    start = {("t", 0): 5}
    end = {("t", 0): 8}
    assert rate_limit(start, end, 100) == end


def test_rate_limit_rejects_non_positive_budget() -> None:
    with pytest.raises(KafkaConfigError, match="max_offsets_per_trigger"):
        rate_limit({}, {}, 0)


@given(
    st.dictionaries(
        st.tuples(st.sampled_from("abc"), st.integers(0, 5)),
        st.tuples(st.integers(0, 1000), st.integers(0, 5000)),
        max_size=12,
    ),
    st.integers(1, 3000),
)
def test_rate_limit_properties(spec: dict, budget: int) -> None:
    start = {tp: lo for tp, (lo, _) in spec.items()}
    end = {tp: lo + n for tp, (lo, n) in spec.items()}
    capped = rate_limit(start, end, budget)
    backlog = sum(end[tp] - start[tp] for tp in end)
    taken = sum(capped[tp] - start[tp] for tp in end)
    assert taken == min(budget, backlog)
    assert all(start[tp] <= capped[tp] <= end[tp] for tp in end)
    # progress is always made while there is a backlog
    assert backlog == 0 or taken > 0


def test_cap_at_available_now_target() -> None:
    start = {("t", 0): 5, ("t", 1): 0}
    end = {("t", 0): 50, ("t", 1): 20, ("new", 0): 7}
    target = {("t", 0): 30, ("t", 1): 40}
    assert cap_at(end, target, start) == {("t", 0): 30, ("t", 1): 20}


def test_split_ranges_cover_every_offset_once() -> None:
    start = {("t", 0): 10, ("t", 1): 0, ("t", 2): 7}
    end = {("t", 0): 1010, ("t", 1): 3, ("t", 2): 7, ("u", 0): 9}
    ranges = split_ranges(start, end, max_split=300)
    covered = [(r.topic, r.partition, o) for r in ranges for o in range(r.start, r.end)]
    expected = [("t", 0, o) for o in range(10, 1010)] + [("t", 1, o) for o in range(3)]
    assert sorted(covered) == sorted(expected)
    t0 = [r for r in ranges if r.partition == 0 and r.topic == "t"]
    assert len(t0) == 4 and max(r.size for r in t0) - min(r.size for r in t0) <= 1
    assert all(r.size <= 300 for r in ranges)


def test_split_of_200k_offsets_gives_several_tasks() -> None:
    ranges = split_ranges({("t", 0): 0}, {("t", 0): 450_000}, max_split=200_000)
    assert ranges == [
        OffsetRange("t", 0, 0, 150_000),
        OffsetRange("t", 0, 150_000, 300_000),
        OffsetRange("t", 0, 300_000, 450_000),
    ]


def test_pack_ranges_balances_tasks_and_keeps_every_range() -> None:
    ranges = split_ranges(
        {("t", 0): 0, ("t", 1): 0, ("t", 2): 0, ("u", 0): 0},
        {("t", 0): 450, ("t", 1): 100, ("t", 2): 90, ("u", 0): 10},
        max_split=200,
    )
    groups = pack_ranges(ranges, 2)
    assert len(groups) == 2
    assert sorted(r for g in groups for r in g) == sorted(ranges)
    loads = sorted(sum(r.size for r in g) for g in groups)
    assert sum(loads) == 650 and loads[1] - loads[0] <= max(r.size for r in ranges)
    assert pack_ranges(ranges[:1], 8) == [ranges[:1]]
    assert pack_ranges([], 2) == []


def test_rounds_hold_one_range_per_partition_and_merge_neighbours() -> None:
    a1, a2, a3 = (
        OffsetRange("t", 0, 0, 10),
        OffsetRange("t", 0, 10, 20),
        OffsetRange("t", 0, 30, 40),
    )
    b = OffsetRange("t", 1, 0, 5)
    assert rounds([a3, b, a1, a2]) == [[OffsetRange("t", 0, 0, 20), b], [a3]]


def test_rewound_names_the_partitions_a_batch_ends_below_its_start() -> None:
    start = {"t": {"0": 20, "1": 20}, "u": {"0": 5}}
    end = {"t": {"0": 3, "1": 25}, "u": {"0": 5}, "v": {"0": 2}}  # v: new, no start
    assert rewound(start, end) == {"t": {"0": [20, 3]}}
    assert rewound(None, end) == {} and rewound(start, start) == {}
