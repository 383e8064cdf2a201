"""`BatchGate`: how many batches write at once, and who goes next."""

from __future__ import annotations

import threading
import time

import pytest

from warehouse.runtime.gate import BatchGate, GateClosed, depths


def _wait_until(check, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


class _Waiter(threading.Thread):
    """Takes a slot of `gate` at `depth`, records when it got in, holds it until released."""

    def __init__(self, gate: BatchGate, depth: int, order: list[str], name: str) -> None:
        super().__init__(daemon=True)
        self.gate, self.depth, self.order, self.label = gate, depth, order, name
        self.release = threading.Event()
        self.cancel = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with self.gate.slot(self.depth, cancelled=self.cancel.is_set):
                self.order.append(self.label)
                self.release.wait(10)
        except BaseException as e:  # noqa: BLE001 - handed to the test
            self.error = e


def _queued(gate: BatchGate) -> int:
    return len(gate._queue)


def test_at_most_slots_inside_and_the_deepest_waiter_goes_next() -> None:
    gate = BatchGate(2)
    order: list[str] = []
    first, second = _Waiter(gate, 0, order, "a"), _Waiter(gate, 0, order, "b")
    first.start(), second.start()
    _wait_until(lambda: len(order) == 2)
    shallow = _Waiter(gate, 0, order, "shallow")
    shallow.start()
    _wait_until(lambda: _queued(gate) == 1)
    deep = _Waiter(gate, 3, order, "deep")
    deep.start()
    middle = _Waiter(gate, 1, order, "middle")
    middle.start()
    _wait_until(lambda: _queued(gate) == 3)
    time.sleep(0.3)
    assert order == ["a", "b"]  # both slots held: nobody else got in
    first.release.set()
    _wait_until(lambda: len(order) == 3)
    assert order[2] == "deep"
    second.release.set()
    _wait_until(lambda: len(order) == 4)
    assert order[3] == "middle"
    deep.release.set()
    _wait_until(lambda: len(order) == 5)
    assert order[4] == "shallow"
    for w in (middle, shallow):
        w.release.set()
    for w in (first, second, shallow, deep, middle):
        w.join(5)
        assert w.error is None
    assert gate.peak == 2


def test_equal_depths_go_in_arrival_order() -> None:
    gate = BatchGate(1)
    order: list[str] = []
    holder = _Waiter(gate, 0, order, "holder")
    holder.start()
    _wait_until(lambda: order == ["holder"])
    waiters = []
    for name in ("x", "y", "z"):
        w = _Waiter(gate, 2, order, name)
        w.start()
        _wait_until(lambda n=len(waiters) + 1: _queued(gate) == n)
        waiters.append(w)
    holder.release.set()
    for w in waiters:
        _wait_until(lambda w=w: w.label in order)
        w.release.set()
    assert order == ["holder", "x", "y", "z"]


def test_a_cancelled_waiter_leaves_the_queue_and_frees_nothing() -> None:
    gate = BatchGate(1)
    order: list[str] = []
    holder = _Waiter(gate, 0, order, "holder")
    holder.start()
    _wait_until(lambda: order == ["holder"])
    stopping = _Waiter(gate, 5, order, "stopping")
    stopping.start()
    after = _Waiter(gate, 0, order, "after")
    after.start()
    _wait_until(lambda: _queued(gate) == 2)
    stopping.cancel.set()
    stopping.join(5)
    assert isinstance(stopping.error, GateClosed)
    assert _queued(gate) == 1
    time.sleep(0.2)
    assert order == ["holder"]  # the slot is still held
    holder.release.set()
    _wait_until(lambda: order == ["holder", "after"])
    after.release.set()
    after.join(5)
    assert gate._busy == 0 and _queued(gate) == 0


def test_an_error_inside_frees_the_slot() -> None:
    gate = BatchGate(1)
    with pytest.raises(RuntimeError), gate.slot(0):
        raise RuntimeError("batch failed")
    with gate.slot(0) as waited:
        assert waited < 1.0


def test_a_gate_needs_a_slot() -> None:
    with pytest.raises(ValueError, match="at least one slot"):
        BatchGate(0)


def test_depths_follow_the_longest_path() -> None:
    upstream = {
        "ods": [],
        "dim": [],
        "dwd": ["ods"],
        "dws": ["dwd", "ods"],
        "ads": ["dws", "dim"],
        "loop_a": ["loop_b"],
        "loop_b": ["loop_a"],
    }
    found = depths(upstream)
    assert {k: found[k] for k in ("ods", "dim", "dwd", "dws", "ads")} == {
        "ods": 0,
        "dim": 0,
        "dwd": 1,
        "dws": 2,
        "ads": 3,
    }
    assert set(found) == set(upstream)  # a cycle (refused by the loader) does not recurse forever


def test_a_reserved_turn_is_kept_for_its_query_then_given_back() -> None:
    gate = BatchGate(1)
    mine, other = object(), object()
    assert gate.reserve(mine, 0, hold=5.0)
    order: list[str] = []
    waiter = _Waiter(gate, 3, order, "deep")  # deeper, but the turn is kept for `mine`
    waiter.start()
    _wait_until(lambda: _queued(gate) == 1)
    with gate.slot(0, key=mine) as waited:
        assert waited < 1.0
        assert order == []
    _wait_until(lambda: order == ["deep"])
    waiter.release.set()
    waiter.join(5)
    # Not taken in time: the kept turn goes back to the next waiter.
    assert gate.reserve(mine, 0, hold=0.3)
    late = _Waiter(gate, 0, order, "late")
    late.start()
    _wait_until(lambda: order == ["deep", "late"])
    late.release.set()
    late.join(5)
    # Another query's key does not take it.
    assert gate.reserve(mine, 0, hold=5.0)
    assert not gate.reserve(other, 0, cancelled=lambda: True)
    assert gate._busy == 1 and _queued(gate) == 0


def test_turn_seconds_count_the_turns_held_and_those_kept() -> None:
    gate = BatchGate(2)
    assert gate.turn_seconds() == (0.0, 0.0)
    began = time.monotonic()
    with gate.slot(0):
        time.sleep(0.2)
        with gate.slot(1):
            time.sleep(0.2)
    held, kept = gate.turn_seconds()
    # one turn for the first 0.2 s, two for the next: at least 0.6 turn-seconds, at
    # most the elapsed time of two turns
    assert 0.6 <= held <= 2 * (time.monotonic() - began)
    assert kept == 0.0
    mine = object()
    assert gate.reserve(mine, 0, hold=5.0)
    time.sleep(0.2)
    with gate.slot(0, key=mine):
        time.sleep(0.1)
    held_after, kept_after = gate.turn_seconds()
    assert held_after - held >= 0.3  # kept, then taken: one turn throughout
    assert 0.2 <= kept_after < held_after - held
    assert gate._busy == 0
