"""A layered real-time data warehouse on Spark, Kafka and Delta (docs/architecture.md).

`Project.load(path, env=...)` reads and validates a project;
`project.pipeline(spark, layer=...).run(once=True)` runs it on your SparkSession.
A Python transform `(DataFrame, TransformContext) -> DataFrame` receives a
`TransformContext`.
"""

from __future__ import annotations

from warehouse.compile.transform import TransformContext
from warehouse.errors import WarehouseError
from warehouse.project import Project
from warehouse.spec.errors import Problem, ProjectError

__all__ = ["Problem", "Project", "ProjectError", "TransformContext", "WarehouseError"]
