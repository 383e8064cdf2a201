"""A warehouse project: a folder with `conf/`, `layers/` and `schemas/` (README, "A tour").

`Project.load` reads and checks everything at once and raises `ProjectError`
listing every problem (file and field each); a loaded project is valid. It never
starts Spark: `pipeline(spark)` takes the caller's session. The one entry point: the
CLI, `spark-submit warehouse/submit.py`, the demo and notebooks all run tables
through `Project.pipeline`.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import streams.storage as storage
from streams.storage import StorageConfigError
from warehouse.compile.fingerprint import TableChange
from warehouse.runtime.changes import table_changes
from warehouse.runtime.pipeline import Pipeline
from warehouse.spec.checks import check_project
from warehouse.spec.errors import Problem, ProjectError
from warehouse.spec.layers import load_tables
from warehouse.spec.loader import load_config, load_schemas
from warehouse.spec.model import LoadedProject
from warehouse.spec.names import with_catalog_names
from warehouse.spec.pycode import forget_modules
from warehouse.testing import LoadedTest, TableTestRunner, load_tests, select_tests

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from warehouse.runtime.failures import RetryPolicy

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
        if config is not None:
            definitions = with_catalog_names(config.catalog, definitions)
        checked = check_project(
            project_dir,
            definitions,
            payload,
            broken,
            unloaded=unloaded,
            clusters=config.kafka.cluster_names if config is not None else None,
            conf=f"conf/{env}.yml",
        )
        problems += checked.problems
        settings = None
        if config is not None:
            try:
                settings = config.storage_settings(env_vars)
            except StorageConfigError as e:
                problems.append(Problem(f"conf/{env}.yml", "storage", str(e)))
        if problems or config is None or settings is None:
            problems.sort(key=lambda p: (p.path.startswith("<"), p.path, p.line or 0))
            raise ProjectError(problems, project=str(project_dir))
        # Every location of the project is read and written with these settings, in this
        # process and in those it starts (Spark's JVM and Python workers).
        storage.configure(config.storage_overrides())
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
        *,
        progress: Callable[[str], None] | None = None,
        batch_progress: Callable[[str], None] | None = None,
        bootstrap: str | None = None,
        retry: RetryPolicy | None = None,
        settle_seconds: float = 60.0,
        full_refresh: Sequence[str] = (),
        full_refresh_all: bool = False,
        allow_data_loss: bool = False,
    ) -> Pipeline:
        """The runnable pipeline of a layer or of named tables, on the caller's session.

        `progress` takes a line per table started, finished or restarted (default: the
        log); `batch_progress` a line per continuous batch (default: `progress`).
        `bootstrap`: a Kafka bootstrap already resolved (default: `kafka.bootstrap`,
        `embedded` starting the bundled broker on demand). `retry`: how a query whose
        Python worker missed Spark's connect window is started again.
        `settle_seconds`: how long a continuous run waits for a query to create its
        sources before it starts the next one. `full_refresh` (tables) or
        `full_refresh_all` (every selected table): reset them and every table reading them
        as a stream, then rebuild those from their inputs (without `layer` or `tables`,
        only those run); a Kafka-sourced one whose topic no longer holds the records its
        rows start from is refused unless `allow_data_loss`."""
        return Pipeline(
            self,
            spark,
            layer=layer,
            tables=list(tables) if tables is not None else None,
            progress=progress,
            batch_progress=batch_progress,
            bootstrap=bootstrap,
            retry=retry,
            settle_seconds=settle_seconds,
            full_refresh=list(full_refresh),
            full_refresh_all=full_refresh_all,
            allow_data_loss=allow_data_loss,
        )

    def changes(self) -> dict[str, TableChange]:
        """Every table's change since its last run (`warehouse plan`): new, unchanged,
        picked up by a restart, or needing a full refresh (with the tables that follow)."""
        return table_changes(self)

    def table_tests(
        self, *, tables: Sequence[str] = (), select: Sequence[str] = ()
    ) -> list[LoadedTest]:
        """The project's table tests (`tests/**/*.yml`), every file checked first: those of
        `tables` (all when empty) whose names match a pattern of `select` (all when
        empty). Raises `TableTestFileError` naming each file and field that is wrong."""
        for name in tables:
            self.table(name)
        return select_tests(load_tests(self), tables=tables, select=select)

    def test_runner(self, spark: SparkSession, workdir: Path) -> TableTestRunner:
        """A runner of this project's table tests on `spark`, with the project's engines,
        writing only under `workdir` (a local folder the caller owns and removes)."""
        from warehouse.runtime import resolve_engines

        return TableTestRunner(self, spark, resolve_engines(spark, self.config.engines), workdir)
