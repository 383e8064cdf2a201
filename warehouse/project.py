"""A warehouse project: a folder with `conf/`, `layers/` and `schemas/` (DESIGN.md §7).

`Project.load` reads and checks everything at once and raises `ProjectError`
listing every problem (file and field each); a loaded project is valid. It never
starts Spark: `pipeline(spark)` takes the caller's session.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warehouse.runtime.pipeline import Pipeline
from warehouse.spec.checks import check_project
from warehouse.spec.errors import Problem, ProjectError
from warehouse.spec.layers import load_tables
from warehouse.spec.loader import load_config, load_schemas
from warehouse.spec.model import LoadedProject
from warehouse.spec.pycode import forget_modules

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)

_ENV_RE = re.compile(r"^[A-Za-z0-9_-]+$")


class Project(LoadedProject):
    """A loaded, valid project (`LoadedProject`) with the user's entry points:
    `Project.load(path, env=...)` and `pipeline(spark)`. Read-only after `load`; safe to
    share between threads."""

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
        # Tables declared but not loaded: their own problems say why, so the tables
        # reading them are not told that they do not exist.
        unloaded = {p.table for p in found if p.table} - {d.name for d in definitions}
        checked = check_project(project_dir, definitions, payload, broken, unloaded=unloaded)
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

    def pipeline(
        self,
        spark: SparkSession,
        layer: str | None = None,
        tables: Sequence[str] | None = None,
    ) -> Pipeline:
        """The runnable pipeline of a layer or of named tables, on the caller's session."""
        return Pipeline(self, spark, layer=layer, tables=tables)
