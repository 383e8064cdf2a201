"""A layered real-time data warehouse on Spark, Kafka and Delta (docs/architecture.md).

`Project.load(path, env=...)` reads and validates a project;
`project.pipeline(spark, layer=...).run(once=True)` runs it on your SparkSession.
`SparkSession.builder.remote("local[2]").config(map=local_connect_conf())` starts a
local Spark Connect server set up as the framework's own local sessions are.
A Python transform `(DataFrame, TransformContext) -> DataFrame` receives a
`TransformContext`.
"""

from __future__ import annotations

from warehouse.compile.transform import TransformContext
from warehouse.errors import WarehouseError
from warehouse.project import Project
from warehouse.runtime.session import local_connect_conf
from warehouse.spec.errors import Problem, ProjectError

__all__ = [
    "Problem",
    "Project",
    "ProjectError",
    "TransformContext",
    "WarehouseError",
    "local_connect_conf",
]
