"""The example warehouse's data generator: `warehouse generate --events N [--rate R]`.

`generate(events, seed=..., start=...)` returns the records (deterministic);
`produce_records(bootstrap, records, pace_from=...)` sends them.
"""

from __future__ import annotations

import logging

from warehouse.generate.model import DEFAULT_START, TOPICS, Record, ShopGenerator, generate, iso
from warehouse.generate.produce import (
    GenerateArgumentError,
    GenerateError,
    GenerateProjectError,
    ProduceStats,
    check_generate_project,
    ensure_topics,
    produce_records,
)

__all__ = [
    "DEFAULT_START",
    "TOPICS",
    "GenerateArgumentError",
    "GenerateError",
    "GenerateProjectError",
    "ProduceStats",
    "Record",
    "ShopGenerator",
    "check_generate_project",
    "ensure_topics",
    "generate",
    "iso",
    "produce_records",
]

logger = logging.getLogger(__name__)
