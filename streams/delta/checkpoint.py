"""Reading what Spark wrote in a query's checkpoint: its id and each batch's end offsets.

Layout (Spark's `OffsetSeqLog` / `StreamMetadata`): `<checkpoint>/metadata` is one JSON
object with the query `id`; `<checkpoint>/offsets/<batch_id>` is `v1`, a line of batch
metadata JSON, then one line per source: that source's end offset as JSON, or `-`
when the source had none yet. The checkpoint is a local path or a URI; it is read
through `streams.storage`.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import streams.storage as storage

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
