"""Declarative specs: pydantic models for environment settings and table files.

No Spark import here: specs are validated when a project loads, not when a
query starts.
"""

from warehouse.spec.config import (
    EmbeddedBroker,
    Engines,
    KafkaSecurity,
    KafkaSettings,
    SparkSettings,
    WarehouseConfig,
    resolve_config,
)
from warehouse.spec.table import (
    LAYERS,
    Aggregate,
    AppendSink,
    Dedupe,
    Expectation,
    JoinStream,
    KafkaPublish,
    KafkaSource,
    Publish,
    Scd2Sink,
    Source,
    TableDefinition,
    TableSpec,
    Transform,
    Trigger,
    UpsertSink,
    Watermark,
    Window,
)

__all__ = [
    "LAYERS",
    "Aggregate",
    "AppendSink",
    "Dedupe",
    "EmbeddedBroker",
    "Engines",
    "Expectation",
    "JoinStream",
    "KafkaPublish",
    "KafkaSecurity",
    "KafkaSettings",
    "KafkaSource",
    "Publish",
    "Scd2Sink",
    "Source",
    "SparkSettings",
    "TableDefinition",
    "TableSpec",
    "Transform",
    "Trigger",
    "UpsertSink",
    "WarehouseConfig",
    "Watermark",
    "Window",
    "resolve_config",
]
