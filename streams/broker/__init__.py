"""A single-node Kafka-protocol broker (codecs from kio, storage in `streams.broker.storage`).

Run it with `python -m streams.broker --data-dir D --port 0 --port-file F`, or
from Python through `streams.broker.launcher` (`BrokerProcess`, `ensure_broker`,
`broker_status`, `stop_broker`). Imports nothing from `warehouse` or other
`streams` packages.

Layout, from the bottom up: `errors` (the Kafka error codes as classes),
`storage` (the commit log), `config`, `protocol` (framing, kio codecs), `security`
(SCRAM, TLS, the ACL model and authorizer), `extension` (the hooks the coordinator
implements), `waiting`, `context` (the `BrokerContext` protocol handlers run against),
`handlers` (the core APIs), `coordinator` (groups, producers, transactions, SASL, and the
metadata log of SCRAM credentials and ACLs), `connection`, `server`,
`app` and `__main__`. Only the launcher and `loggable_value` (a config value as it may
be printed: `[hidden]` for a password) are re-exported here: they import no server
code, so the CLI can import them cheaply.
"""

from __future__ import annotations

from streams.broker.config import loggable_value
from streams.broker.launcher import (
    BrokerAddressInUseError,
    BrokerProcess,
    BrokerStartError,
    broker_status,
    ensure_broker,
    stop_broker,
)

__all__ = [
    "BrokerAddressInUseError",
    "BrokerProcess",
    "BrokerStartError",
    "broker_status",
    "ensure_broker",
    "loggable_value",
    "stop_broker",
]
