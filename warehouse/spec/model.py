"""A loaded, valid project as the layers below the `Project` facade take it.

`LoadedProject` holds what loading produced (settings, tables in run order, their
graph and columns, payload schemas) and answers where each table's data lives
(`warehouse.spec.paths`). `compile` and `runtime` take it; `warehouse.project.Project`
extends it with `load` and `pipeline`. No Spark.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from warehouse.spec import paths
from warehouse.spec.config import WarehouseConfig
from warehouse.spec.errors import Problem, ProjectError, UnknownTableError
from warehouse.spec.graph import TableGraph
from warehouse.spec.pycode import ImportProblem, import_reference
from warehouse.spec.schemas import Columns
from warehouse.spec.table import TableDefinition


@dataclass(frozen=True, eq=False, repr=False)
class LoadedProject:
    """A loaded, valid project. Read-only; safe to share between threads."""

    path: Path
    env: str
    config: WarehouseConfig
    tables: dict[str, TableDefinition]
    graph: TableGraph
    schemas: dict[str, Columns]
    payload_schemas: dict[str, Columns]
    root: str = field(init=False)
    """`warehouse_root` as an absolute location: a local path or a URI (`s3a://b/wh`)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", self.config.root_location(self.path))

    def table(self, name: str) -> TableDefinition:
        try:
            return self.tables[name]
        except KeyError:
            raise UnknownTableError(name, self.tables) from None

    def table_path(self, name: str) -> str:
        return paths.table_path(self.root, name)

    def checkpoint_path(self, name: str) -> str:
        return paths.checkpoint_path(self.root, name)

    def quarantine_path(self, name: str) -> str:
        return paths.quarantine_path(self.root, name)

    def catalog_name(self, name: str) -> str | None:
        """The table's name in the session's catalog (`catalog.schema.table`), or None
        without `catalog:`."""
        catalog = self.config.catalog
        return None if catalog is None else catalog.name(name, self.tables[name].layer)

    def quarantine_catalog_name(self, name: str) -> str | None:
        """The name of the table's quarantine (`<table>__quarantine`) in the catalog."""
        catalog = self.config.catalog
        layer = self.tables[name].layer
        return None if catalog is None else catalog.name(paths.quarantine_name(name), layer)

    def broker_dir(self) -> Path:
        """Data folder of the embedded broker: `kafka.embedded.data_dir` or `<root>/broker`."""
        return paths.broker_dir(self.path, self.root, self.config.kafka.embedded.data_dir)

    def layer(self, layer: str | None) -> list[TableDefinition]:
        """The tables of one layer (all when None or `all`), in run order."""
        return [self.tables[n] for n in self.graph.layers(layer)]

    def transform_callable(self, name: str) -> Callable[..., Any]:
        """The Python transform of table `name`, imported from the project folder."""
        definition = self.table(name)
        ref = definition.python
        if ref is None:
            raise ProjectError(
                [
                    Problem(
                        definition.path,
                        "transform.python",
                        "the table has no Python transform",
                        table=name,
                    )
                ]
            )
        try:
            return import_reference(self.path, ref)
        except ImportProblem as e:
            raise ProjectError(
                [Problem(definition.path, "transform.python", str(e), table=name)]
            ) from e

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(path={str(self.path)!r}, env={self.env!r}, "
            f"tables={list(self.tables)})"
        )
