"""Hand-written projects of the integration tests: a topic filled with records, the
local conf against a real broker, a Delta table's rows read back."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from streams.delta.arrow import read_table
from streams.kafka.admin import ensure_topic, produce


def new_topic(
    bootstrap: str,
    topic: str,
    records: Sequence[tuple[Any, Any]] = (),
    *,
    partitions: int = 1,
) -> str:
    """Create `topic` with `partitions` partitions, produce `records` (if any) into it
    and return its name."""
    ensure_topic(bootstrap, topic, partitions=partitions)
    if records:
        produce(bootstrap, topic, list(records))
    return topic


def start_project(
    root: Path,
    bootstrap: str,
    layer: str,
    *,
    delta: str = "python",
    kafka: str = "python",
    parse: str | None = None,
    schemas: dict[str, str] | None = None,
) -> Path:
    """Write `conf/local.yml` into `root` (Kafka at `bootstrap` on the `kafka` engine,
    Delta on `delta`, `parse` if given, local[2] Spark), the `schemas` files given
    (name: text), and make `layers/<layer>`; return that layer's folder."""
    (root / "conf").mkdir(parents=True)
    engines = f"kafka: {kafka}, delta: {delta}" + (f", parse: {parse}" if parse else "")
    (root / "conf" / "local.yml").write_text(
        f"warehouse_root: {root / '.warehouse'}\n"
        f'kafka:\n  bootstrap: "{bootstrap}"\n'
        f"engines: {{{engines}}}\n"
        'spark:\n  master: "local[2]"\n  conf:\n    spark.sql.shuffle.partitions: "2"\n'
    )
    if schemas is not None:
        (root / "schemas").mkdir()
        for name, text in schemas.items():
            (root / "schemas" / name).write_text(text)
    return new_layer(root, layer)


def new_layer(root: Path, layer: str) -> Path:
    """Make the project's `layers/<layer>` folder (and `layers/`) and return it."""
    folder = root / "layers" / layer
    folder.mkdir(parents=True)
    return folder


def table_rows(path: Path, columns: list[str]) -> list[tuple]:
    """The Delta table's rows as tuples of `columns`, in a stable order (nulls included)."""
    table = read_table(str(path), columns=columns)
    return sorted((tuple(r[c] for c in columns) for r in table.to_pylist()), key=repr)
