"""A table's transform: its SQL or Python over a DataFrame, inside an error boundary.

`TransformContext` is what a user's Python transform receives besides its
DataFrame (exported as `warehouse.TransformContext`). pyspark is imported inside
functions.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from warehouse.compile.errors import TransformError
from warehouse.compile.sql import SOURCE_VIEW, rewrite_views, sql_text
from warehouse.errors import root_cause_line

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from warehouse.spec.model import LoadedProject
    from warehouse.spec.table import TableDefinition


@dataclass
class TransformContext:
    """What a Python transform gets besides its DataFrame."""

    spark: SparkSession
    table: str
    layer: str
    project: LoadedProject
    batch_id: int | None = None
    options: dict[str, Any] = field(default_factory=dict)


def load_callable(
    project: LoadedProject, ref: str, *, table: str, layer: str
) -> Callable[..., Any]:
    """The table's Python transform `package.module:function`, imported from the project."""
    fn = project.transform_callable(table)
    if not callable(fn):
        raise TransformError(
            f"Table `{table}` (layer `{layer}`): `{ref}` is not callable; it must be a function "
            "`(DataFrame, context) -> DataFrame`.",
            table=table,
            layer=layer,
        )
    return fn


def apply_transform(
    df: DataFrame,
    *,
    project: LoadedProject,
    defn: TableDefinition,
    views: dict[str, str],
    batch_id: int | None = None,
    registered: list[str] | None = None,
    fn: Callable[..., Any] | None = None,
) -> DataFrame:
    """Run the table's SQL or Python transform over `df` inside an error boundary.

    `views` maps other table names in the SQL to already registered view names;
    `df` itself is registered as a fresh view standing for `source`. `fn`: the table's
    Python transform as already imported (`CompiledTransform`); without it, imported here.
    """
    from pyspark.sql import DataFrame

    spec = defn.spec
    table, layer = defn.name, defn.layer
    spark = df.sparkSession
    if spec.transform is not None and spec.transform.python:
        if fn is None:
            fn = load_callable(project, spec.transform.python, table=table, layer=layer)
        ctx = TransformContext(
            spark=spark, table=table, layer=layer, project=project, batch_id=batch_id
        )
        try:
            out = fn(df, ctx)
        except Exception as e:
            raise TransformError(
                f"Table `{table}` (layer `{layer}`): the Python transform "
                f"`{spec.transform.python}` raised {type(e).__name__}: {e}",
                table=table,
                layer=layer,
            ) from e
        if not isinstance(out, DataFrame):
            raise TransformError(
                f"Table `{table}` (layer `{layer}`): the Python transform "
                f"`{spec.transform.python}` returned `{type(out).__name__}`, expected a DataFrame.",
                table=table,
                layer=layer,
            )
        return out
    text = sql_text(project, defn)
    if text is None:
        return df
    source_view = f"{SOURCE_VIEW}_{table}_{uuid.uuid4().hex[:8]}"
    df.createOrReplaceTempView(source_view)
    if registered is not None:
        registered.append(source_view)
    sql = rewrite_views(text, {**views, SOURCE_VIEW: source_view}, table=table)
    try:
        return spark.sql(sql)
    except Exception as e:
        raise TransformError(
            f"Table `{table}` (layer `{layer}`, {defn.path}): the SQL transform failed: "
            f"{root_cause_line(e)}. Fix `transform.sql`.",
            table=table,
            layer=layer,
        ) from e


@dataclass(frozen=True)
class CompiledTransform:
    """A table's transform as its program runs it: over the stream of a table input (when
    the table compiles), or over each batch's parsed rows of a Kafka input. `views` maps
    the other tables its SQL names to their registered views. A Python transform is
    imported once, here, when the table compiles: a batch calls the function its query
    started with, and never touches the process's import system (`python`)."""

    project: LoadedProject
    definition: TableDefinition
    views: dict[str, str]
    python: Callable[..., Any] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        defn = self.definition
        t = defn.spec.transform
        if t is not None and t.python:
            fn = load_callable(self.project, t.python, table=defn.name, layer=defn.layer)
            object.__setattr__(self, "python", fn)

    def __reduce__(self) -> tuple[Any, ...]:
        # A Spark Connect server's worker gets the program pickled; the function is
        # imported again there (the project's folder on its path only for the import),
        # not pickled as a reference to a module that worker cannot import.
        return (CompiledTransform, (self.project, self.definition, self.views))

    def apply(
        self,
        df: DataFrame,
        *,
        batch_id: int | None = None,
        registered: list[str] | None = None,
    ) -> DataFrame:
        """`apply_transform` of `df`; the views it registers are added to `registered`."""
        return apply_transform(
            df,
            project=self.project,
            defn=self.definition,
            views=self.views,
            batch_id=batch_id,
            registered=registered,
            fn=self.python,
        )
