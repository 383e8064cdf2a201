"""A single-node Kafka-protocol broker (codecs from kio, storage in `streams.broker.storage`).

Run it with `python -m streams.broker --data-dir D --port 0 --port-file F`, or
from Python through `streams.broker.launcher` (`BrokerProcess`, `ensure_broker`,
`broker_status`, `stop_broker`). Imports nothing from `warehouse` or other
`streams` packages.
"""

from __future__ import annotations

from streams.broker.launcher import (
    BrokerProcess,
    BrokerStartError,
    broker_status,
    ensure_broker,
    stop_broker,
)

__all__ = ["BrokerProcess", "BrokerStartError", "broker_status", "ensure_broker", "stop_broker"]
