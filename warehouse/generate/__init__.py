"""The example warehouse's data generator: `warehouse generate --events N [--rate R]`.

`generate(events, seed=..., start=...)` returns the records (deterministic);
`produce_records(bootstrap, records, pace_from=...)` sends them; `main(args)` is the
CLI subcommand.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging

from warehouse.generate.model import DEFAULT_START, TOPICS, Record, ShopGenerator, generate, iso
from warehouse.generate.produce import (
    GenerateArgumentError,
    GenerateError,
    ProduceStats,
    ensure_topics,
    produce_records,
)

__all__ = [
    "DEFAULT_START",
    "TOPICS",
    "GenerateArgumentError",
    "GenerateError",
    "ProduceStats",
    "Record",
    "ShopGenerator",
    "ensure_topics",
    "generate",
    "iso",
    "main",
    "produce_records",
]

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `generate` subcommand's options."""
    parser.add_argument("--events", type=int, default=3000, help="business events (default 3000)")
    parser.add_argument(
        "--rate",
        type=float,
        default=None,
        help="events per second, with event times from now (default: all at once, "
        f"event times from {iso(DEFAULT_START)})",
    )
    parser.add_argument("--seed", type=int, default=7, help="random seed (default 7)")


def main(args: argparse.Namespace) -> int:
    """Produce the example's events to the project's Kafka (the embedded broker on demand)."""
    from warehouse.project import Project
    from warehouse.runtime.bootstrap import resolve_bootstrap

    if args.events < 0 or (args.rate is not None and args.rate <= 0):
        raise GenerateArgumentError(
            f"`--events` must be >= 0 and `--rate` > 0 (got `{args.events}` and `{args.rate}`); "
            "e.g. `warehouse generate --events 3000 --rate 20`."
        )
    project = Project.load(args.project, env=args.env)
    bootstrap = resolve_bootstrap(project, start=True)
    assert bootstrap is not None

    client = project.config.kafka.client_config()
    ensure_topics(bootstrap, client_config=client)
    if args.rate:
        gen = ShopGenerator(
            seed=args.seed, start=dt.datetime.now(dt.UTC), seconds_per_event=1.0 / args.rate
        )
        records = gen.records(args.events)
        print(f"producing {args.events} events at {args.rate:g}/s to {bootstrap}", flush=True)
    else:
        records = iter(generate(args.events, seed=args.seed))
    stats = produce_records(
        bootstrap,
        records,
        pace_from=0.0 if args.rate else None,
        client_config=client,
        progress=lambda s: print(f"  {s.line()}", flush=True),
    )
    print(stats.line(), flush=True)
    return 0
