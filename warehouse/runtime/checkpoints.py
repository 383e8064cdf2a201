"""What a run checks of its tables' checkpoints before any query starts.

- `refuse_other_engine`: a checkpoint resumes only on the Delta engine whose source wrote it.
- `refuse_new_over_table`: a new checkpoint (lost, deleted, replaced) over a table that
  already holds batches would read the input again from its start and write it a second
  time; the run is refused, naming `warehouse recover` (Kafka) or `warehouse reset`
  (docs/architecture.md, "Exactly-once").
- `refuse_interrupted_recover`: a checkpoint a `warehouse recover` on object storage was
  replacing when it stopped is neither the old one nor the new one.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from warehouse.runtime.errors import NewCheckpointError, RuntimeConfigError
from warehouse.spec import paths
from warehouse.spec.paths import checkpoint_is_new, recovering_file, table_exists
from warehouse.spec.table import TopicSource

if TYPE_CHECKING:
    from warehouse.spec.model import LoadedProject


def refuse_other_engine(project: LoadedProject, names: list[str], delta: str) -> None:
    """Before any query starts: a checkpoint resumes only on the Delta engine whose
    source wrote it. delta-spark's source and the Python one record a table's position
    in forms the other cannot read (the Python source failed on a native checkpoint with
    `KeyError: 'version'`, deep in its worker), and `engines: auto` changes its choice
    when the native jars come or go. Every such table is named at once."""
    from streams.delta import delta_source_engines

    other = "python" if delta == "native" else "native"
    names = [n for n in names if other in delta_source_engines(project.checkpoint_path(n))]
    if not names:
        return
    source = {
        "native": "delta-spark's `delta` source (the native engine)",
        "python": "the framework's Python Delta source (the Python engine)",
    }
    jars = "; `warehouse jars fetch` caches its jars" if other == "native" else ""
    if len(names) == 1:
        name = names[0]
        which = (
            f"Table `{name}` ({project.tables[name].path}): its checkpoint "
            f"{project.checkpoint_path(name)} was"
        )
        reset = f"`warehouse reset --table {name} --yes`, then run it: it reads"
    else:
        which = (
            "Tables "
            + ", ".join(f"`{n}` ({project.tables[n].path})" for n in names)
            + f": their checkpoints (under {paths.join(project.root, paths.CHECKPOINTS_DIR)}) were"
        )
        reset = "`warehouse reset --table T --yes` for each, then run them: they read"
    raise RuntimeConfigError(
        f"{which} written by {source[other]}, and this run reads Delta through "
        f"{source[delta]}: `engines.delta` resolved to `{delta}`. A checkpoint resumes "
        "only on the engine that wrote it: run on that one "
        f"(`engines: {{delta: {other}}}` in conf/<env>.yml{jars}), or start over "
        f"({reset} the input again from the start).",
        table=names[0],
    )


def refuse_interrupted_recover(project: LoadedProject, names: list[str]) -> None:
    """Before any query starts: no table whose checkpoint a `warehouse recover` was
    replacing on object storage when it stopped (its marker is left): the checkpoint may
    be missing files, and Spark would start it under another query id or from another
    batch. Running `warehouse recover` again replaces it whole."""
    import streams.storage as storage

    stopped = [n for n in names if storage.exists(recovering_file(project.checkpoint_path(n)))]
    if not stopped:
        return
    raise RuntimeConfigError(
        "\n".join(
            f"Table `{n}`: `warehouse recover` stopped while it replaced the checkpoint "
            f"{project.checkpoint_path(n)} (its marker {recovering_file(project.checkpoint_path(n))} "
            f"is left). Run `warehouse recover --table {n}` again before running it."
            for n in stopped
        ),
        table=stopped[0],
    )


def refuse_new_over_table(project: LoadedProject, names: list[str]) -> None:
    """Before any query starts: no table whose checkpoint is new (no batch planned in it)
    while its Delta table already has commits. Spark starts a new checkpoint from the
    source's start (`starting_offsets`, an input table's first version) and the commit
    guard's app id comes from the checkpoint, so the table's earlier batches would be
    read and written again. Every such table is named at once, each with its way out."""
    problems = [_problem(project, n) for n in names if _new_over_table(project, n)]
    if not problems:
        return
    first = next(n for n in names if _new_over_table(project, n))
    raise NewCheckpointError(
        "\n".join(problems),
        table=first,
        path=str(project.checkpoint_path(first)),
    )


def _new_over_table(project: LoadedProject, name: str) -> bool:
    return checkpoint_is_new(project.checkpoint_path(name)) and table_exists(
        project.table_path(name)
    )


def _problem(project: LoadedProject, name: str) -> str:
    from streams.delta import recorded_batch

    defn = project.tables[name]
    path = project.table_path(name)
    batch = recorded_batch(path, name)
    holds = "already holds commits"
    if batch is not None and batch.batch_id is not None:
        holds = (
            f"already holds batches up to batch {batch.batch_id} of `{batch.app_id}`, "
            f"which read up to `{json.dumps(batch.end, sort_keys=True)}`"
        )
    src = defn.spec.source
    if isinstance(src, TopicSource):
        start = src.kafka.starting_offsets
        again = (
            f"would read {', '.join(f'topic `{t}`' for t in src.topics) or 'its topics'} "
            "again from `starting_offsets` "
            f"(`{start if isinstance(start, str) else json.dumps(start)}`)"
        )
        way = (
            f"Run `warehouse recover --table {name}` to go on from where the table is (a new "
            f"checkpoint from the offsets its commits recorded), or `warehouse reset --table "
            f"{name} --yes` to rebuild it from the start."
        )
    else:
        again = f"would read table `{src.table}` again from its first version"
        way = (
            f"Run `warehouse reset --table {name} --yes` to rebuild it from its input "
            "(a table read from another table has no position to recover)."
        )
    return (
        f"Table `{name}` ({defn.path}): its checkpoint {project.checkpoint_path(name)} is "
        f"new (lost, deleted or replaced), but the table {path} {holds}. A new checkpoint "
        f"{again} and write those records a second time. {way}"
    )
