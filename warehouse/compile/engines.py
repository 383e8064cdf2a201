"""The engines a run reads and writes with, once resolved (`warehouse.runtime.engines`).

Typed engine objects, not names: what sets them apart is asked of their capabilities
(`KafkaEngine.reads_in_python_tasks`, `DeltaEngine.commits_with_delta_rs`, ...), never of
their names. No Spark import at module import.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from streams.delta import DeltaEngine
    from streams.kafka import KafkaEngine

Parse = Literal["arrow", "spark"]


@dataclass(frozen=True)
class ResolvedEngines:
    """The Kafka and Delta engines of a run, and how Kafka JSON is parsed: `arrow` where a
    table allows it (`streams.landing`), or always by Spark (`engines.parse: spark`)."""

    kafka: KafkaEngine
    delta: DeltaEngine
    parse: Parse = "arrow"

    @classmethod
    def named(
        cls,
        kafka: Literal["python", "native"] = "python",
        delta: Literal["python", "native"] = "python",
        parse: Parse = "arrow",
    ) -> ResolvedEngines:
        """The engines called `kafka` and `delta` (`python` or `native`)."""
        from streams.delta import delta_engine
        from streams.kafka import kafka_engine

        return cls(kafka_engine(kafka), delta_engine(delta), parse)

    def __str__(self) -> str:
        return f"kafka={self.kafka.name}, delta={self.delta.name}, parse={self.parse}"
