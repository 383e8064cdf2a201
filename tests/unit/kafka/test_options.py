"""Options of the Python Kafka source are checked when the reader is built, with
messages naming the option (no broker, no Spark session needed)."""

from __future__ import annotations

import pickle

import pytest

from streams.kafka.errors import KafkaConfigError
from streams.kafka.offsets import OffsetRange
from streams.kafka.source import SCHEMA, KafkaInputPartition, KafkaStreamReader, _Options

BASE = {"bootstrap": "127.0.0.1:1", "topics": "a, b"}


def test_topics_are_split_and_client_options_pass_through() -> None:
    opts = _Options(
        {
            **BASE,
            "client_config": '{"security.protocol": "SASL_SSL"}',
            "kafka.sasl.mechanism": "PLAIN",
            "max_offsets_per_trigger": "500",
        }
    )
    assert opts.topics == ["a", "b"]
    assert opts.client_config == {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}
    assert opts.max_offsets == 500
    assert opts.isolation_level == "read_committed" and opts.on_data_loss == "fail"
    assert opts.matches("a") and not opts.matches("c")


def test_pattern_matches_whole_names_and_skips_internal_topics() -> None:
    opts = _Options({"bootstrap": "h:1", "pattern": "shop\\..*"})
    assert opts.matches("shop.orders")
    assert not opts.matches("xshop.orders")
    assert not _Options({"bootstrap": "h:1", "pattern": ".*"}).matches("__consumer_offsets")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"topics": "a"}, "needs `bootstrap`"),
        ({"bootstrap": "h:1"}, "exactly one of `topics`"),
        ({**BASE, "pattern": "x"}, "exactly one of `topics`"),
        ({"bootstrap": "h:1", "pattern": "("}, "not a valid regular expression"),
        ({**BASE, "max_offsets_per_trigger": "0"}, "`max_offsets_per_trigger` must be a positive"),
        ({**BASE, "on_data_loss": "ignore"}, "on_data_loss must be `fail` or `skip`"),
        ({**BASE, "isolation_level": "dirty"}, "isolation_level must be"),
        ({**BASE, "starting_offsets": "yesterday"}, "neither `earliest`, `latest` nor JSON"),
    ],
)
def test_bad_options_name_the_option(options: dict[str, str], message: str) -> None:
    with pytest.raises(KafkaConfigError, match=message):
        _Options(options)


def test_reader_and_partitions_pickle_without_connecting() -> None:
    reader = KafkaStreamReader(BASE, SCHEMA)
    copy = pickle.loads(pickle.dumps(reader))
    assert copy._opts.topics == ["a", "b"] and copy._admin is None
    part = KafkaInputPartition([OffsetRange("a", 0, 5, 9)])
    assert pickle.loads(pickle.dumps(part)).ranges == (OffsetRange("a", 0, 5, 9),)
