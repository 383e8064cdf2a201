"""Offset arithmetic of the Kafka source: pure functions, no client, no Spark.

Offsets travel through Spark's checkpoint as JSON, so partitions are string keys:
`{"topic": {"0": 42, "1": 7}}`. Inside the source they are `{(topic, partition): offset}`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from streams.kafka.errors import KafkaConfigError

TP = tuple[str, int]
Offsets = dict[TP, int]

# Spark's Kafka source uses -2 / -1 for earliest / latest in startingOffsets JSON.
EARLIEST = -2
LATEST = -1


def to_json_dict(offsets: Mapping[TP, int]) -> dict[str, dict[str, int]]:
    """`{(t, p): o}` -> `{"t": {"p": o}}`, topics and partitions in sorted order."""
    out: dict[str, dict[str, int]] = {}
    for (topic, part), off in sorted(offsets.items()):
        out.setdefault(topic, {})[str(part)] = int(off)
    return out


def from_json_dict(data: Mapping[str, Mapping[str, Any]] | None) -> Offsets:
    """`{"t": {"p": o}}` -> `{(t, p): o}`; raises `KafkaConfigError` on a malformed value."""
    out: Offsets = {}
    for topic, parts in (data or {}).items():
        if not isinstance(parts, Mapping):
            raise KafkaConfigError(
                f"Offsets for topic `{topic}` must map partition to offset, got `{parts!r}`.",
                option="starting_offsets",
            )
        for part, off in parts.items():
            try:
                out[(str(topic), int(part))] = int(off)
            except (TypeError, ValueError) as e:
                raise KafkaConfigError(
                    f"Offset of topic `{topic}` partition `{part}` must be an integer, "
                    f"got `{off!r}`.",
                    option="starting_offsets",
                ) from e
    return out


def rewound(
    start: Mapping[str, Mapping[str, Any]] | None, end: Mapping[str, Mapping[str, Any]] | None
) -> dict[str, dict[str, list[int]]]:
    """The partitions a batch ends below where it started (`{"t": {"p": [start, end]}}`):
    their log was found to end before the query's position (a topic created again, a
    broker that lost records), and the batch went on in the log there is now."""
    before, after = from_json_dict(start), from_json_dict(end)
    out: dict[str, dict[str, list[int]]] = {}
    for (topic, part), off in sorted(after.items()):
        if (topic, part) in before and off < before[(topic, part)]:
            out.setdefault(topic, {})[str(part)] = [before[(topic, part)], off]
    return out


@dataclass(frozen=True)
class StartingOffsets:
    """`earliest`, `latest`, or explicit offsets (`-2` earliest, `-1` latest per partition)."""

    mode: str  # "earliest" | "latest" | "explicit"
    explicit: Mapping[TP, int] | None = None


def parse_starting_offsets(value: str | Mapping[str, Any] | None) -> StartingOffsets:
    """Accept `"earliest"`, `"latest"`, a dict `{"t": {"0": 5}}` or its JSON text."""
    if value is None:
        return StartingOffsets("earliest")
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in ("earliest", "latest"):
            return StartingOffsets(text.lower())
        try:
            value = json.loads(text)
        except json.JSONDecodeError as e:
            raise KafkaConfigError(
                f"starting_offsets `{value}` is neither `earliest`, `latest` nor JSON like "
                '`{"topic": {"0": 42}}`.',
                option="starting_offsets",
            ) from e
    if not isinstance(value, Mapping):
        raise KafkaConfigError(
            f"starting_offsets must be `earliest`, `latest` or a mapping, got `{value!r}`.",
            option="starting_offsets",
        )
    return StartingOffsets("explicit", from_json_dict(value))


def resolve_start(
    spec: StartingOffsets, earliest: Mapping[TP, int], latest: Mapping[TP, int]
) -> Offsets:
    """Concrete starting offsets for every known partition. Partitions that an explicit
    spec does not name start at earliest, like partitions discovered later."""
    out: Offsets = {}
    for tp in latest:
        lo, hi = earliest.get(tp, 0), latest[tp]
        if spec.mode == "latest":
            out[tp] = hi
        elif spec.mode == "earliest":
            out[tp] = lo
        else:
            want = (spec.explicit or {}).get(tp, EARLIEST)
            out[tp] = lo if want == EARLIEST else hi if want == LATEST else want
    return out


def rate_limit(start: Mapping[TP, int], end: Mapping[TP, int], max_records: int) -> Offsets:
    """Cap the range `start..end` at `max_records` in total, shared across partitions in
    proportion to their backlog (like Spark's Kafka source), apportioned by largest
    remainder so the total is exactly `min(max_records, backlog)`. A partition with a
    backlog gets at least one record while the budget allows, so none starves."""
    if max_records <= 0:
        raise KafkaConfigError(
            f"max_offsets_per_trigger must be positive, got `{max_records}`.",
            option="max_offsets_per_trigger",
        )
    sizes = {tp: end[tp] - start.get(tp, end[tp]) for tp in end}
    backlog = {tp: s for tp, s in sizes.items() if s > 0}
    total = sum(backlog.values())
    if total <= max_records:
        return dict(end)
    shares: dict[TP, int] = {}
    remainders: list[tuple[float, TP]] = []
    for tp, size in backlog.items():
        exact = max_records * size / total
        shares[tp] = min(size, math.floor(exact))
        remainders.append((exact - math.floor(exact), tp))
    left = max_records - sum(shares.values())
    # Starved partitions first, then the largest fractional remainders.
    remainders.sort(key=lambda r: (shares[r[1]] > 0, -r[0], r[1]))
    while left > 0:
        progressed = False
        for _, tp in remainders:
            if left == 0:
                break
            if shares[tp] < backlog[tp]:
                shares[tp] += 1
                left -= 1
                progressed = True
        if not progressed:
            break
    return {tp: (start[tp] + shares[tp] if tp in shares else end[tp]) for tp in end}


def cap_at(end: Mapping[TP, int], target: Mapping[TP, int], start: Mapping[TP, int]) -> Offsets:
    """For `Trigger.AvailableNow`: never go past the target recorded at preparation;
    partitions that appeared after it stay where they start."""
    out: Offsets = {}
    for tp, off in end.items():
        if tp in target:
            out[tp] = max(min(off, target[tp]), start.get(tp, 0))
        elif tp in start:
            out[tp] = start[tp]
    return out


@dataclass(frozen=True, order=True)
class OffsetRange:
    """Records `[start, end)` of one partition; one Spark task reads one range."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def split_ranges(
    start: Mapping[TP, int], end: Mapping[TP, int], *, max_split: int
) -> list[OffsetRange]:
    """One range per partition with data, split into pieces of at most `max_split` offsets
    of near-equal size so one large partition does not become one long task."""
    if max_split <= 0:
        raise KafkaConfigError(
            f"split size must be positive, got `{max_split}`.", option="split_offsets"
        )
    out: list[OffsetRange] = []
    for (topic, part), hi in sorted(end.items()):
        lo = start.get((topic, part))
        if lo is None or hi <= lo:
            continue
        pieces = -(-(hi - lo) // max_split)
        step, extra = divmod(hi - lo, pieces)
        pos = lo
        for i in range(pieces):
            nxt = pos + step + (1 if i < extra else 0)
            out.append(OffsetRange(topic, part, pos, nxt))
            pos = nxt
    return out


def pack_ranges(ranges: list[OffsetRange], groups: int) -> list[list[OffsetRange]]:
    """Pack ranges into at most `groups` tasks of near-equal offset counts (largest
    first onto the lightest task). One task reads its ranges with one consumer, so
    one fetch request serves several partitions."""
    if groups <= 0:
        raise KafkaConfigError(f"task count must be positive, got `{groups}`.", option="max_tasks")
    if not ranges:
        return []
    n = min(groups, len(ranges))
    bins: list[list[OffsetRange]] = [[] for _ in range(n)]
    loads = [0] * n
    for rng in sorted(ranges, key=lambda r: (-r.size, r.topic, r.partition, r.start)):
        i = min(range(n), key=lambda k: (loads[k], k))
        bins[i].append(rng)
        loads[i] += rng.size
    return [sorted(b, key=lambda r: (r.topic, r.partition, r.start)) for b in bins]


def rounds(ranges: list[OffsetRange]) -> list[list[OffsetRange]]:
    """Order one task's ranges into rounds with at most one range per partition each
    (a consumer holds one position per partition); adjacent pieces are merged."""
    merged: list[OffsetRange] = []
    for rng in sorted(ranges, key=lambda r: (r.topic, r.partition, r.start)):
        last = merged[-1] if merged else None
        if (
            last
            and (last.topic, last.partition) == (rng.topic, rng.partition)
            and last.end == rng.start
        ):
            merged[-1] = OffsetRange(rng.topic, rng.partition, last.start, rng.end)
        else:
            merged.append(rng)
    out: list[list[OffsetRange]] = []
    for rng in merged:
        for rnd in out:
            if all((r.topic, r.partition) != (rng.topic, rng.partition) for r in rnd):
                rnd.append(rng)
                break
        else:
            out.append([rng])
    return out
