"""Reading what Spark wrote in a query's checkpoint: its id and each batch's end offsets;
and writing one back for `warehouse recover` (`write_replay_checkpoint`).

Layout (Spark's `OffsetSeqLog` / `StreamMetadata` / `CommitLog`): `<checkpoint>/metadata`
is one JSON object with the query `id`; `<checkpoint>/offsets/<batch_id>` is `v1`, a line
of batch metadata JSON, then one line per source: that source's end offset as JSON, or
`-` when the source had none yet; `<checkpoint>/commits/<batch_id>` is `v1` and a line of
JSON, written once the batch's sink is done. The checkpoint is a local path or a URI;
it is read and written through `streams.storage`.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import streams.storage as storage
from streams.delta.errors import DeltaConfigError

logger = logging.getLogger(__name__)


def checkpoint_query_id(checkpoint_dir: str | Path) -> str | None:
    """The query `id` of the checkpoint (stable across restarts), or None if not started yet."""
    text = storage.read_text(storage.join(str(checkpoint_dir), "metadata"))
    if text is None:
        return None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            qid = json.loads(line).get("id")
            return str(qid) if qid else None
    return None


def _parse_offset(line: str) -> Any:
    line = line.strip()
    if not line or line == "-":
        return None
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        # A source whose offsets are not JSON (some JVM sources write plain text).
        return line


def batch_end_offsets(checkpoint_dir: str | Path, batch_id: int) -> dict | None:
    """The end offsets of batch `batch_id`, as parsed JSON.

    With one source: that source's offset (the Kafka source's `{"topic": {"0": 42}}`).
    With several (stream-stream joins): `{"sources": [offset, ...]}` in the query's
    source order. None when Spark has not written the batch's offset file.
    """
    path = storage.join(str(checkpoint_dir), "offsets", str(int(batch_id)))
    text = storage.read_text(path)
    if text is None:
        logger.debug("no offset log entry %s", path)
        return None
    lines = text.splitlines()
    if not lines or not lines[0].startswith("v"):
        logger.warning("offset log entry %s has no version line; ignoring it", path)
        return None
    sources = [_parse_offset(line) for line in lines[2:]]
    if len(sources) == 1:
        return sources[0] if isinstance(sources[0], dict) else {"offset": sources[0]}
    return {"sources": sources}


def delta_source_engines(checkpoint_dir: str | Path) -> set[str]:
    """The Delta engines whose streaming sources wrote the checkpoint's latest offsets:
    `native` for delta-spark's source (`{"reservoirVersion": ...}`), `python` for this
    package's (`{"version": v, "table": id}`, or `{"version": v}` as first written);
    empty for a new checkpoint or one without a Delta source. Neither engine's source
    reads the other's offsets."""
    folder = storage.join(str(checkpoint_dir), "offsets")
    batches = [int(n) for n in storage.list_names(folder) if n.isdigit()]
    if not batches:
        return set()
    lines = (storage.read_text(storage.join(folder, str(max(batches)))) or "").splitlines()
    engines = set()
    for offset in (_parse_offset(line) for line in lines[2:]):
        if not isinstance(offset, dict):
            continue
        if "reservoirVersion" in offset:
            engines.add("native")
        elif set(offset) <= {"version", "table"} and isinstance(offset.get("version"), int):
            engines.add("python")  # a Kafka offset's values are partition maps, not ints
    return engines


def delta_source_position(checkpoint_dir: str | Path, table_id: str) -> int | None:
    """The first version of the Delta table with id `table_id` that the checkpoint's query
    still reads (its next batch's, or its planned batch 0's), by either engine's source;
    None when it has no position in that table (no batch planned over it).

    The next batch starts at the newest committed batch's end: the Python source's
    `{"version": v}` is the last version read (it reads from `v + 1`), delta-spark's
    `{"reservoirVersion": v, "index": i}` a place in version `v`. A batch 0 planned and not
    committed reads from the start: version 0 for the Python source (it replays the table
    from its first version) and for delta-spark's started at a version (this package
    starts it at 0: a change feed, or a table only appended to, decision 0069), the
    snapshot at `reservoirVersion` for delta-spark's started at a snapshot
    (`isStartingVersion`)."""
    folder = str(checkpoint_dir)
    committed = _batch_ids(storage.join(folder, "commits"))
    planned = _batch_ids(storage.join(folder, "offsets"))
    if not planned:
        return None
    batch = max(committed) if committed else min(planned)
    text = storage.read_text(storage.join(folder, "offsets", str(batch)))
    if text is None:
        return None
    lines = text.splitlines()
    found = []
    for offset in (_parse_offset(line) for line in lines[2:]):
        if not isinstance(offset, dict):
            continue
        if offset.get("reservoirId") == table_id and "reservoirVersion" in offset:
            from_snapshot = offset.get("isStartingVersion", True)
            found.append(int(offset["reservoirVersion"]) if committed or from_snapshot else 0)
        elif offset.get("table") == table_id and isinstance(offset.get("version"), int):
            found.append(int(offset["version"]) + 1 if committed else 0)
    return min(found) if found else None


def _batch_ids(folder: str) -> list[int]:
    return [int(n) for n in storage.list_names(folder) if n.isdigit()]


_LOGS = ("offsets", "commits")


def remove_interrupted_writes(checkpoint_dir: str | Path) -> list[str]:
    """Delete the temporary files a killed query left in its offset and commit logs; the
    paths removed.

    Spark writes each log entry to a hidden `.<batch>.<uuid>.tmp` (and its `.crc`) and
    renames it into place, so such a file is never part of the log. But Spark refuses to
    start a query whose `offsets/` holds any file while no batch is logged
    (`STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY`): a SIGKILL during the very first offset
    write would leave the checkpoint unusable. Call only while no query runs on it.
    """
    removed: list[str] = []
    for log in _LOGS:
        folder = storage.join(str(checkpoint_dir), log)
        for name in storage.list_names(folder):
            if name.startswith(".") and (name.endswith(".tmp") or name.endswith(".tmp.crc")):
                storage.remove(storage.join(folder, name))
                removed.append(storage.join(folder, name))
    if removed:
        logger.warning(
            "checkpoint %s: removed %d file(s) of an interrupted log write: %s",
            checkpoint_dir,
            len(removed),
            ", ".join("/".join(r.rsplit("/", 2)[-2:]) for r in removed),
        )
    return removed


def _source_lines(offsets: dict) -> str:
    """An offset log entry's source lines: one, or one per source of `{"sources": [...]}`
    (as `batch_end_offsets` reads a several-source query's entry)."""
    sources = offsets.get("sources") if set(offsets) == {"sources"} else None
    if isinstance(sources, list):
        return "\n".join(json.dumps(s) for s in sources)
    return json.dumps(offsets)


def write_replay_checkpoint(
    checkpoint_dir: str | Path,
    *,
    query_id: str,
    batch_id: int,
    start: dict | None,
    end: dict,
    committed: bool = False,
    settings_from: str | Path | None = None,
    settings: Mapping[str, str] | None = None,
) -> None:
    """Write a new checkpoint of a query (`checkpoint_dir` must not exist; offsets of
    one source, or `{"sources": [...]}` of several in the query's order) as
    Spark leaves one whose batch `batch_id` was planned, `[start, end)`, and not
    committed: the query `query_id` started on it replays that batch, then goes on.
    `committed`: the batch is committed too, and the query goes on from `end`.

    `start` is the end of batch `batch_id - 1` (logged and committed before it); batch 0
    has none (its start is the source's initial offset). The batch metadata records the
    session settings of the newest batch of the checkpoint `settings_from` (the one
    replaced), else `settings`: Spark then takes its defaults for the other settings of
    stateful operators, which a query without state does not use, and logs a warning
    for each, once. Spark 4.2 reads `spark.sql.shuffle.partitions` of the last two
    batches whatever the query (`OfflineStateRepartitionUtils.isRepartitionBatch`) and
    fails a replay without it (`None.get`): give it in `settings`, as the query's
    session has it."""
    folder = str(checkpoint_dir)
    if storage.exists(folder):
        raise DeltaConfigError(
            f"Checkpoint `{folder}` exists; a replay checkpoint is written only where none is.",
            path=folder,
            option="checkpoint",
        )
    conf = _batch_settings(str(settings_from)) if settings_from is not None else {}
    conf = conf or dict(settings or {})
    meta = json.dumps(
        {"batchWatermarkMs": 0, "batchTimestampMs": int(time.time() * 1000), "conf": conf}
    )
    offsets, commits = storage.join(folder, "offsets"), storage.join(folder, "commits")
    if batch_id > 0 and not committed:
        if start is None:
            raise DeltaConfigError(
                f"Checkpoint `{folder}`: batch {batch_id} needs the offsets it starts from "
                f"(the end of batch {batch_id - 1}); none were given.",
                path=folder,
                option="start",
            )
        storage.write_text(
            storage.join(offsets, str(batch_id - 1)), f"v1\n{meta}\n{_source_lines(start)}"
        )
        storage.write_text(storage.join(commits, str(batch_id - 1)), _COMMIT)
    storage.write_text(storage.join(offsets, str(batch_id)), f"v1\n{meta}\n{_source_lines(end)}")
    if committed:
        storage.write_text(storage.join(commits, str(batch_id)), _COMMIT)
    # Written last: a checkpoint is a query's only once its metadata names the query.
    storage.write_text(storage.join(folder, "metadata"), json.dumps({"id": query_id}) + "\n")
    logger.info(
        "checkpoint %s written: query %s %s batch %d (%s to %s)",
        folder,
        query_id,
        "resumes after" if committed else "replays",
        batch_id,
        start,
        end,
    )


_COMMIT = 'v1\n{"nextBatchWatermarkMs":0}'


def _batch_settings(checkpoint: str) -> dict[str, str]:
    """The session settings the checkpoint's newest offset log entry records, or none."""
    folder = storage.join(checkpoint, "offsets")
    batches = _batch_ids(folder)
    if not batches:
        return {}
    lines = (storage.read_text(storage.join(folder, str(max(batches)))) or "").splitlines()
    try:
        conf = json.loads(lines[1]).get("conf") if len(lines) > 1 else None
    except json.JSONDecodeError:
        conf = None
    return {str(k): str(v) for k, v in conf.items()} if isinstance(conf, dict) else {}
