"""A warehouse project: a folder with `conf/`, `layers/` and `schemas/` (DESIGN.md §7).

`Project.load` reads and checks everything at once and raises `ProjectError`
listing every problem (file and field each); a loaded project is valid. It never
starts Spark: `pipeline(spark)` takes the caller's session.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warehouse.compile.graph import TableGraph
from warehouse.spec.checks import check_project
from warehouse.spec.config import WarehouseConfig
from warehouse.spec.errors import Problem, ProjectError, UnknownTableError
from warehouse.spec.layers import load_tables
from warehouse.spec.loader import load_config, load_schemas
from warehouse.spec.pycode import ImportProblem, forget_modules, import_reference
from warehouse.spec.schemas import Columns
from warehouse.spec.table import TableDefinition

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from warehouse.runtime.pipeline import Pipeline

logger = logging.getLogger(__name__)

_ENV_RE = re.compile(r"^[A-Za-z0-9_-]+$")


class Project:
    """A loaded, valid project. Read-only after `load`; safe to share between threads."""

    def __init__(
        self,
        *,
        path: Path,
        env: str,
        config: WarehouseConfig,
        tables: dict[str, TableDefinition],
        graph: TableGraph,
        schemas: dict[str, Columns],
        payload_schemas: dict[str, Columns],
    ) -> None:
        self.path = path
        self.env = env
        self.config = config
        self.root = config.root_path(path).resolve()
        self.tables = tables
        self.graph = graph
        self.schemas = schemas
        self.payload_schemas = payload_schemas

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str] = ".",
        env: str = "local",
        *,
        environ: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> Project:
        """Read `conf/<env>.yml`, `schemas/` and `layers/`; check them all; raise every problem.

        `overrides` win over the environment and the file: `warehouse_root="/tmp/w"`,
        `kafka={"bootstrap": "h:9092"}` or, flat, `kafka__bootstrap="h:9092"`.
        `environ` replaces `os.environ` for `${VAR}` and `WAREHOUSE__...` (tests).
        """
        project_dir = Path(path).expanduser().resolve()
        if not project_dir.is_dir():
            raise ProjectError(
                [Problem(str(path), "", f"no project folder at `{project_dir}`")],
                project=str(project_dir),
            )
        if not _ENV_RE.match(env):
            raise ProjectError(
                [
                    Problem(
                        "conf/", "", f"`{env}` is not an env name; use letters, digits, `_`, `-`"
                    )
                ],
                project=str(project_dir),
            )
        env_vars = os.environ if environ is None else environ
        problems: list[Problem] = []
        config, found = load_config(project_dir, env, environ=env_vars, overrides=overrides)
        problems += found
        payload, broken, found = load_schemas(project_dir)
        problems += found
        forget_modules()
        definitions, found = load_tables(project_dir)
        problems += found
        checked = check_project(project_dir, definitions, payload, broken)
        problems += checked.problems
        if problems or config is None:
            problems.sort(key=lambda p: (p.path.startswith("<"), p.path, p.line or 0))
            raise ProjectError(problems, project=str(project_dir))
        logger.info("loaded project %s (env %s): %d tables", project_dir, env, len(checked.tables))
        return cls(
            path=project_dir,
            env=env,
            config=config,
            tables=checked.tables,
            graph=checked.graph,
            schemas=checked.schemas,
            payload_schemas=dict(payload),
        )

    def table(self, name: str) -> TableDefinition:
        try:
            return self.tables[name]
        except KeyError:
            raise UnknownTableError(name, self.tables) from None

    def table_path(self, name: str) -> Path:
        return self.root / "tables" / name

    def checkpoint_path(self, name: str) -> Path:
        return self.root / "checkpoints" / name

    def quarantine_path(self, name: str) -> Path:
        return self.root / "tables" / f"{name}__quarantine"

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

    def pipeline(
        self,
        spark: SparkSession,
        layer: str | None = None,
        tables: Sequence[str] | None = None,
    ) -> Pipeline:
        """The runnable pipeline of a layer or of named tables, on the caller's session."""
        from warehouse.runtime.pipeline import Pipeline

        return Pipeline(self, spark, layer=layer, tables=tables)

    def __repr__(self) -> str:
        return f"Project(path={str(self.path)!r}, env={self.env!r}, tables={list(self.tables)})"
