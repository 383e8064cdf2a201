"""`warehouse produce` and `warehouse consume`: JSON lines into a topic, a topic out as lines.

Both go through `streams.kafka`'s clients (`produce`, and `read_range` over the ranges
`end_offsets` reports), so they read and write exactly as the framework does.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from warehouse.cli.errors import ConsumeError, TopicInputError, UsageError

logger = logging.getLogger(__name__)

Record = tuple[bytes | None, bytes]

_SHOWN_PROBLEMS = 5
_POLL_SECONDS = 0.5


def _clip(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _key_bytes(value: Any) -> bytes:
    """A key field as the record key: a string as it is, anything else as compact JSON."""
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value, separators=(",", ":")).encode()


def _line_record(raw: bytes, key: str | None) -> tuple[Record | None, str | None]:
    """`(record, None)` for a good line, `(None, why)` for a bad one, `(None, None)` for a
    blank one."""
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError as e:
        return None, f"not UTF-8 text ({e.reason} at byte {e.start})"
    if not text:
        return None, None
    try:
        row = json.loads(text)
    except json.JSONDecodeError as e:
        return None, f"not valid JSON ({e.msg} at column {e.colno}): `{_clip(text)}`"
    if key is None:
        return (None, text.encode()), None
    if not isinstance(row, dict):
        return None, f"a JSON {type(row).__name__}, not an object with the key field `{key}`"
    if row.get(key) is None:
        state = "is null" if key in row else "is missing"
        have = ", ".join(f"`{k}`" for k in list(row)[:8]) or "none"
        return None, f"the key field `{key}` {state} (fields: {have})"
    return (_key_bytes(row[key]), text.encode()), None


def read_json_lines(lines: Iterable[bytes], *, source: str, key: str | None = None) -> list[Record]:
    """Every line of `lines` checked and turned into a `(key, value)` record.

    All lines are checked before anything is sent, so a bad input sends nothing: the
    records are held in memory. Blank lines are skipped (they still count for line
    numbers). The value is the line as written; with `key` it must be a JSON object
    whose top-level `key` field is present and not null. Raises `TopicInputError`
    naming the first few bad lines and how many there are.
    """
    records: list[Record] = []
    bad: list[tuple[int, str]] = []
    for number, raw in enumerate(lines, start=1):
        record, why = _line_record(raw, key)
        if why is not None:
            bad.append((number, why))
        elif record is not None:
            records.append(record)
    if bad:
        shown = "\n".join(f"  {source} line {n}: {why}" for n, why in bad[:_SHOWN_PROBLEMS])
        more = (
            f"\n  ... and {len(bad) - _SHOWN_PROBLEMS} more" if len(bad) > _SHOWN_PROBLEMS else ""
        )
        raise TopicInputError(
            f"{len(bad)} of the lines of {source} cannot be produced, so nothing was sent:\n"
            f"{shown}{more}\nEach line must be one JSON value"
            + (f" (a JSON object with a non-null `{key}`)" if key else "")
            + "; fix the lines and run the command again.",
            source=source,
            lines=[n for n, _ in bad],
        )
    return records


def open_input(path: str) -> tuple[Iterable[bytes], str]:
    """The lines of `path` (`-`: standard input) and how messages name it."""
    if path == "-":
        if sys.stdin.isatty():
            print("reading JSON lines from standard input; Ctrl-D ends", file=sys.stderr)
        return sys.stdin.buffer, "standard input"
    file = Path(path)
    if not file.is_file():
        raise UsageError(
            f"Input file `{path}` does not exist or is not a file; give a file of JSON "
            "lines, or `-` to read standard input."
        )
    return file.read_bytes().splitlines(), f"`{path}`"


def produce_lines(
    bootstrap: str,
    topic: str,
    records: list[Record],
    *,
    client_config: Mapping[str, Any],
) -> int:
    """Send `records` to `topic` and return how many the broker acknowledged. A topic that
    does not exist is created by the broker with its defaults (`auto.create.topics.enable`,
    `num.partitions`), as Kafka does."""
    from streams.kafka import produce

    return produce(bootstrap, topic, records, client_config=client_config)


def _show(data: bytes | None) -> str:
    return "null" if data is None else data.decode("utf-8", errors="backslashreplace")


def consume_topic(
    bootstrap: str,
    topic: str,
    *,
    client_config: Mapping[str, Any],
    from_beginning: bool,
    max_records: int | None,
    idle_timeout: float,
    out: Callable[[str], None],
) -> int:
    """Print `key<TAB>value` for each record of `topic` read with `read_committed`, and
    return how many were printed.

    Starts at each partition's end (its last stable offset), or at its beginning with
    `from_beginning`; a partition that appears later is read from its beginning. Stops
    after `max_records`, or once nothing new arrived for `idle_timeout` seconds (0: never).
    Raises `ConsumeError` when the topic could not be read for the whole idle timeout.
    """
    from confluent_kafka import OFFSET_BEGINNING
    from pyspark.sql.pandas.types import to_arrow_schema

    from streams.kafka import (
        SCHEMA_WITHOUT_HEADERS,
        KafkaStreamError,
        OffsetRange,
        consumer_config,
        end_offsets,
        read_range,
    )

    schema = to_arrow_schema(SCHEMA_WITHOUT_HEADERS, timezone="UTC")
    # librdkafka logs at info (6) when a short-lived admin client is dropped with its
    # background queue not empty; that is every poll here, and not news to a user.
    client_config = {"log_level": 4, **client_config}
    positions: dict[int, int] | None = None  # None until the topic was seen
    missed = False  # the topic was not there at the start: all it gets is new
    printed = 0
    last_news = time.monotonic()
    failure: KafkaStreamError | None = None
    while True:
        try:
            ends = end_offsets(bootstrap, topic, client_config=client_config, read_committed=True)[
                topic
            ]
            failure = None
        except KafkaStreamError as e:  # not there (yet): a view appears on its first publish
            ends, failure, missed = {}, e, missed or positions is None
        if positions is None and failure is None:
            at_end = not from_beginning and not missed
            positions = {p: end if at_end else OFFSET_BEGINNING for p, end in ends.items()}
        for part, end in sorted(ends.items()):
            assert positions is not None
            pos = positions.setdefault(part, OFFSET_BEGINNING)  # a partition added since
            if end <= max(pos, 0):
                continue
            conf = consumer_config(
                bootstrap,
                dict(client_config),
                isolation_level="read_committed",
                size=end - max(pos, 0),
            )
            for batch in read_range(OffsetRange(topic, part, pos, end), conf, schema):
                keys, values = batch.column("key").to_pylist(), batch.column("value").to_pylist()
                for k, v in zip(keys, values, strict=True):
                    out(f"{_show(k)}\t{_show(v)}")
                    printed += 1
                    if max_records is not None and printed >= max_records:
                        return printed
            positions[part] = end
            last_news = time.monotonic()
        idle = time.monotonic() - last_news
        if idle_timeout and idle >= idle_timeout:
            if failure is not None and positions is None:
                raise ConsumeError(
                    f"Topic `{topic}` on `{bootstrap}`: nothing could be read for "
                    f"{idle_timeout:g}s (last error: {failure}). A published view's topic "
                    "exists once its table has published; check the name with "
                    "`warehouse plan`, or wait longer with `--timeout`.",
                    topic=topic,
                ) from failure
            return printed
        time.sleep(_POLL_SECONDS if not idle_timeout else min(_POLL_SECONDS, idle_timeout - idle))
