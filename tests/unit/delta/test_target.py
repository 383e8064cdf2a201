"""DeltaTarget validation and the commit properties of a batch."""

from __future__ import annotations

import pytest

from streams.delta import DeltaConfigError, DeltaTarget, commit_properties


@pytest.mark.parametrize(
    ("kwargs", "option"),
    [
        ({"app_id": ""}, "app_id"),
        ({"app_id": "a", "mode": "upsert"}, "keys"),
        ({"app_id": "a", "mode": "scd2", "keys": ["k"]}, "sequence_by"),
        ({"app_id": "a", "mode": "merge"}, "mode"),
        ({"app_id": "a", "engine": "jvm"}, "engine"),
        ({"app_id": "a", "optimize_every": 0}, "optimize_every"),
    ],
)
def test_bad_targets_name_the_option_and_path(kwargs: dict, option: str) -> None:
    with pytest.raises(DeltaConfigError) as info:
        DeltaTarget("/t/orders", **kwargs)
    assert info.value.option == option
    assert "`/t/orders`" in str(info.value)


def test_commit_properties_carry_the_txn_writer_batch_and_json_metadata() -> None:
    t = DeltaTarget("/t/x", app_id="x:q1", keys=["k"], mode="upsert")
    props = commit_properties(t, 7, {"warehouse.sourceOffsets": {"t": {"0": 5}}, "b": "s"})
    assert [(x.app_id, x.version) for x in props.app_transactions] == [("x:q1", 7)]
    assert props.custom_metadata == {
        "warehouse.sourceOffsets": '{"t": {"0": 5}}',
        "b": "s",
        "warehouse.appId": "x:q1",
        "warehouse.batchId": "7",
    }
    assert t.keys == ("k",)
