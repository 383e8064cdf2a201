"""Nexmark's events, seeded: people who sell and bid, auctions, and bids, as JSON in Kafka.

    .venv/bin/python benchmarks/nexmark/generator.py --bootstrap HOST:PORT \\
        [--events 100000] [--seed 1] [--rate 1000] [--partitions 1]

Event `n` of the stream is, by `n % 50`, a person (0), an auction (1-3) or a bid (4-49):
Nexmark's proportions 1:3:46. Its event time is `BASE_TIME + n / rate` seconds, so the
stream is in event-time order and `rate` sets how many events a window of event time
holds. Ids count from 1000 in the order they are made (person `1000 + k` is the k-th
person), and every reference is to an entity made before it: a seller or bidder is an
existing person, a bid's auction an existing auction. As in Nexmark's generator, most
sellers, bidders and auctioned items are "hot" (one of the newest few), the rest drawn
from the newest people and auctions; prices are `round(10 ** U(0, 6) * 100) / 100`-ish
cents; categories are 10-14; auctions last a few seconds to a minute of event time.

The fields are those RisingWave and Arroyo name in snake case (Flink's `dateTime` is
`date_time` here): `person(id, name, email_address, credit_card, city, state, date_time,
extra)`, `auction(id, item_name, description, initial_bid, reserve, date_time, expires,
seller, category, extra)`, `bid(auction, bidder, price, channel, url, date_time, extra)`.

Each kind goes to a topic of its own (`person`, `auction`, `bid`), as RisingWave's
Kafka set-up of the benchmark reads them; keys are the entity's id (a bid's auction).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BASE_TIME = dt.datetime(2015, 7, 15, tzinfo=dt.UTC)
"""Nexmark's base time (its `BASE_TIME`, 2015-07-15 00:00:00 UTC)."""
PROPORTION = 50
PERSONS, AUCTIONS = 1, 3
"""Of every 50 events: 1 person, 3 auctions, the other 46 bids."""
FIRST_ID = 1000
FIRST_CATEGORY, CATEGORIES = 10, 5
HOT_RATIO = 4
"""One in `HOT_RATIO` references is to any recent entity, the rest to a hot one."""
HOT_AUCTIONS = 2
"""Bids go to the newest auction rounded down to a multiple of this."""
IN_FLIGHT = 100
"""A non-hot reference is to one of the newest `IN_FLIGHT` people or auctions."""
TOPICS = {"person": "person", "auction": "auction", "bid": "bid"}

FIRST_NAMES = ["Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah"]
LAST_NAMES = ["Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones"]
STATES = ["AZ", "CA", "ID", "OR", "WA", "WY"]
CITIES = [
    "Phoenix",
    "Los Angeles",
    "San Francisco",
    "Boise",
    "Portland",
    "Bend",
    "Redmond",
    "Seattle",
    "Kent",
    "Cheyenne",
]
CHANNELS = ["Google", "Facebook", "Baidu", "Apple"]


def iso(t: dt.datetime) -> str:
    """`2015-07-15T00:00:01.250Z`: milliseconds, UTC, as the framework's schemas read them."""
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


@dataclass
class Events:
    """The generated events by kind, each a JSON-ready row, in event order."""

    person: list[dict[str, Any]] = field(default_factory=list)
    auction: list[dict[str, Any]] = field(default_factory=list)
    bid: list[dict[str, Any]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.person) + len(self.auction) + len(self.bid)


def _price(rnd: random.Random) -> int:
    return round(10 ** (rnd.random() * 6) * 100)


def _recent(rnd: random.Random, newest: int) -> int:
    """Index of one of the newest `IN_FLIGHT` of the `newest + 1` entities, uniformly."""
    return newest - rnd.randrange(min(IN_FLIGHT, newest + 1))


def _person(rnd: random.Random, k: int, t: dt.datetime) -> dict[str, Any]:
    name = f"{rnd.choice(FIRST_NAMES)} {rnd.choice(LAST_NAMES)}"
    return {
        "id": FIRST_ID + k,
        "name": name,
        "email_address": f"{name.replace(' ', '.').lower()}{k}@example.com",
        "credit_card": " ".join(f"{rnd.randrange(10000):04d}" for _ in range(4)),
        "city": rnd.choice(CITIES),
        "state": rnd.choice(STATES),
        "date_time": iso(t),
        "extra": "",
    }


def _auction(rnd: random.Random, k: int, newest_person: int, t: dt.datetime) -> dict[str, Any]:
    if rnd.randrange(HOT_RATIO) > 0:
        seller = (newest_person // HOT_RATIO) * HOT_RATIO
    else:
        seller = _recent(rnd, newest_person)
    initial = _price(rnd)
    return {
        "id": FIRST_ID + k,
        "item_name": f"item-{k}",
        "description": f"description of item {k}",
        "initial_bid": initial,
        "reserve": initial + _price(rnd),
        "date_time": iso(t),
        "expires": iso(t + dt.timedelta(milliseconds=rnd.randrange(2_000, 60_000))),
        "seller": FIRST_ID + seller,
        "category": FIRST_CATEGORY + rnd.randrange(CATEGORIES),
        "extra": "",
    }


def _bid(
    rnd: random.Random, newest_auction: int, newest_person: int, t: dt.datetime
) -> dict[str, Any]:
    if rnd.randrange(HOT_AUCTIONS) > 0:
        auction = (newest_auction // HOT_AUCTIONS) * HOT_AUCTIONS
    else:
        auction = _recent(rnd, newest_auction)
    if rnd.randrange(HOT_RATIO) > 0:
        bidder = min(newest_person, (newest_person // HOT_RATIO) * HOT_RATIO + 1)
    else:
        bidder = _recent(rnd, newest_person)
    channel = rnd.randrange(len(CHANNELS))
    return {
        "auction": FIRST_ID + auction,
        "bidder": FIRST_ID + bidder,
        "price": _price(rnd),
        "channel": CHANNELS[channel],
        "url": f"https://www.nexmark.com/{CHANNELS[channel].lower()}/item.htm?query=1",
        "date_time": iso(t),
        "extra": "",
    }


def stream(events: int, *, seed: int = 1, rate: int = 1000) -> Iterator[tuple[str, dict]]:
    """The first `events` events as `(kind, row)`, in event order; the same for the same
    `seed` and `rate` (events per second of event time)."""
    if events < 0 or rate <= 0:
        raise ValueError(f"events must be >= 0 and rate > 0, got events={events} rate={rate}")
    rnd = random.Random(seed)
    for n in range(events):
        epoch, slot = divmod(n, PROPORTION)
        t = BASE_TIME + dt.timedelta(microseconds=n * 1_000_000 // rate)
        if slot < PERSONS:
            yield "person", _person(rnd, epoch, t)
        elif slot < PERSONS + AUCTIONS:
            yield "auction", _auction(rnd, epoch * AUCTIONS + slot - PERSONS, epoch, t)
        else:
            yield "bid", _bid(rnd, epoch * AUCTIONS + AUCTIONS - 1, epoch, t)


def generate(events: int, *, seed: int = 1, rate: int = 1000) -> Events:
    """`stream(...)` collected by kind."""
    out = Events()
    for kind, row in stream(events, seed=seed, rate=rate):
        getattr(out, kind).append(row)
    return out


def produce_events(bootstrap: str, events: Events, *, partitions: int = 1) -> dict[str, int]:
    """Each kind to its topic (created with `partitions` partitions) through the project's
    producer helpers, keyed by id (a bid by its auction); the records delivered per topic."""
    from streams.kafka import ensure_topic, produce_json

    keys = {"person": "id", "auction": "id", "bid": "auction"}
    delivered = {}
    for kind, topic in TOPICS.items():
        ensure_topic(bootstrap, topic, partitions=partitions)
        delivered[topic] = produce_json(bootstrap, topic, getattr(events, kind), key=keys[kind])
    return delivered


def write_ndjson(events: Events, folder: Path) -> Path:
    """Each kind as `<folder>/<kind>.json`, one JSON object a line (the reference reads
    these); returns `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    for kind in TOPICS:
        with (folder / f"{kind}.json").open("w") as f:
            for row in getattr(events, kind):
                f.write(json.dumps(row, separators=(",", ":")) + "\n")
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=1)
    args = parser.parse_args(argv)
    events = generate(args.events, seed=args.seed, rate=args.rate)
    for topic, n in produce_events(args.bootstrap, events, partitions=args.partitions).items():
        print(f"{topic}: {n} records")
    return 0


if __name__ == "__main__":
    sys.exit(main())
