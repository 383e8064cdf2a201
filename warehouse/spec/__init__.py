"""Declarative specs: pydantic models for environment settings and table files.

No Spark import here: specs are validated when a project loads, not when a
query starts.
"""

from warehouse.spec.config import (
    DEFAULT_CLUSTER,
    EmbeddedBroker,
    Engines,
    KafkaCluster,
    KafkaSecurity,
    KafkaSettings,
    SparkSettings,
    WarehouseConfig,
    resolve_config,
)
from warehouse.spec.errors import Problem, ProjectError, UnknownTableError
from warehouse.spec.graph import Edge, TableGraph, build_graph
from warehouse.spec.model import LoadedProject
from warehouse.spec.schemas import Column, Columns
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
    Snapshots,
    Source,
    TableDefinition,
    TableSource,
    TableSpec,
    TopicSource,
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
    "Column",
    "Columns",
    "Dedupe",
    "EmbeddedBroker",
    "Engines",
    "Expectation",
    "Edge",
    "JoinStream",
    "KafkaPublish",
    "DEFAULT_CLUSTER",
    "KafkaCluster",
    "KafkaSecurity",
    "KafkaSettings",
    "KafkaSource",
    "LoadedProject",
    "Problem",
    "ProjectError",
    "Publish",
    "Scd2Sink",
    "Snapshots",
    "Source",
    "SparkSettings",
    "TableDefinition",
    "TableGraph",
    "TableSource",
    "TableSpec",
    "TopicSource",
    "Transform",
    "Trigger",
    "UnknownTableError",
    "UpsertSink",
    "WarehouseConfig",
    "Watermark",
    "Window",
    "build_graph",
    "resolve_config",
]
