"""Reading what Spark wrote in a query's checkpoint: its id and each batch's end offsets.

Layout (Spark's `OffsetSeqLog` / `StreamMetadata`): `<checkpoint>/metadata` is one JSON
object with the query `id`; `<checkpoint>/offsets/<batch_id>` is `v1`, a line of batch
metadata JSON, then one line per source: that source's end offset as JSON, or `-`
when the source had none yet.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)


def checkpoint_query_id(checkpoint_dir: str | Path) -> str | None:
    """The query `id` of the checkpoint (stable across restarts), or None if not started yet."""
    meta = Path(checkpoint_dir) / "metadata"
    try:
        text = meta.read_text()
    except FileNotFoundError:
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
    path = Path(checkpoint_dir) / "offsets" / str(int(batch_id))
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        logger.debug("no offset log entry %s", path)
        return None
    if not lines or not lines[0].startswith("v"):
        logger.warning("offset log entry %s has no version line; ignoring it", path)
        return None
    sources = [_parse_offset(line) for line in lines[2:]]
    if len(sources) == 1:
        return sources[0] if isinstance(sources[0], dict) else {"offset": sources[0]}
    return {"sources": sources}
