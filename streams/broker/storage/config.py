"""`LogConfig`: the per-topic log settings, with Kafka's names and defaults.

Built from a Kafka-style `dict[str, str]` (`LogConfig.from_kafka({...})`, as in
CreateTopics / AlterConfigs requests) or from keyword arguments. Invalid values
raise `InvalidConfigError` naming the key.

`compression.type` is kept and described as Kafka does (default `producer`), but
batches are always stored as the producer compressed them: the broker never
recompresses, so a value other than `producer` is only reported, not applied.

Flush policy. `durability` is this broker's knob:
- `"interval"` (default): appends are written to the page cache; `LogManager`
  fsyncs dirty logs when `flush.ms` / `flush.messages` say so
  (`LogManager.flush_due`). The high watermark is the log end offset.
- `"sync"`: every acknowledged append must be fsynced: the server calls
  `LogManager.flush_dirty()` (one fsync per dirty segment, shared by all appends
  made since) before acking, and the high watermark is the flushed offset, so a
  consumer never sees data a crash could take away.

`CleanerConfig` holds the broker-wide settings of the log cleaner (Kafka's
`log.cleaner.*` broker configs), read from the broker's `key=value` pairs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Literal

from streams.broker.errors import InvalidConfigError

CleanupPolicy = Literal["delete", "compact", "compact,delete"]
Durability = Literal["interval", "sync"]
CompressionType = Literal["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]

_MAX_LONG = 2**63 - 1
_MAX_INT = 2**31 - 1

# Kafka key -> (attribute, kind, minimum)
_KEYS: dict[str, tuple[str, str, int]] = {
    "segment.bytes": ("segment_bytes", "int", 14),
    "segment.ms": ("segment_ms", "long", 1),
    "retention.ms": ("retention_ms", "long", -1),
    "retention.bytes": ("retention_bytes", "long", -1),
    "cleanup.policy": ("cleanup_policy", "policy", 0),
    "delete.retention.ms": ("delete_retention_ms", "long", 0),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", "long", 0),
    "index.interval.bytes": ("index_interval_bytes", "int", 0),
    "flush.messages": ("flush_messages", "long", 1),
    "flush.ms": ("flush_ms", "long", 0),
    "max.message.bytes": ("max_message_bytes", "int", 0),
    "message.timestamp.type": ("message_timestamp_type", "tstype", 0),
    "durability": ("durability", "durability", 0),
    "compression.type": ("compression_type", "compression", 0),
    "min.insync.replicas": ("min_insync_replicas", "int", 1),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", "double", 0),
}

COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Settings of one partition log (immutable; `with_changes` returns a new one)."""

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    retention_ms: int = 7 * 24 * 3600 * 1000  # -1: no time limit
    retention_bytes: int = -1  # -1: no size limit
    cleanup_policy: CleanupPolicy = "delete"
    delete_retention_ms: int = 24 * 3600 * 1000
    min_compaction_lag_ms: int = 0
    index_interval_bytes: int = 4096
    flush_messages: int = _MAX_LONG
    flush_ms: int = _MAX_LONG
    max_message_bytes: int = 1024 * 1024 + 12
    message_timestamp_type: Literal["CreateTime", "LogAppendTime"] = "CreateTime"
    durability: Durability = "interval"
    # Stored and described as Kafka's; batches are kept as the producer compressed
    # them whatever the value (the broker never recompresses).
    compression_type: CompressionType = "producer"
    # Kafka caps it at the partition's replica count, which is 1 here: acks=all
    # succeeds whatever the value, as on a one-replica topic of a Kafka cluster.
    min_insync_replicas: int = 1
    # Clean a compacted log only when at least this share of its cleanable bytes was
    # written since its last cleaning (cleaner-offset-checkpoint); Kafka's default.
    min_cleanable_dirty_ratio: float = 0.5

    def __post_init__(self) -> None:
        for key, (attr, kind, minimum) in _KEYS.items():
            value = getattr(self, attr)
            if kind in ("int", "long"):
                limit = _MAX_INT if kind == "int" else _MAX_LONG
                if isinstance(value, bool) or not isinstance(value, int):
                    raise InvalidConfigError(
                        f"Config `{key}` must be an integer, got `{value!r}`.", key=key
                    )
                if not minimum <= value <= limit:
                    raise InvalidConfigError(
                        f"Config `{key}` is `{value}`; it must be between {minimum} and {limit}.",
                        key=key,
                    )
            elif kind == "double" and (
                isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1
            ):
                raise InvalidConfigError(
                    f"Config `{key}` is `{value!r}`; it must be a number between 0 and 1.",
                    key=key,
                )
            elif kind == "policy" and value not in ("delete", "compact", "compact,delete"):
                raise InvalidConfigError(
                    f"Config `cleanup.policy` is `{value}`; use `delete`, `compact` or "
                    "`compact,delete`.",
                    key=key,
                )
            elif kind == "tstype" and value not in ("CreateTime", "LogAppendTime"):
                raise InvalidConfigError(
                    f"Config `message.timestamp.type` is `{value}`; use `CreateTime` or "
                    "`LogAppendTime`.",
                    key=key,
                )
            elif kind == "compression" and value not in COMPRESSION_TYPES:
                raise InvalidConfigError(
                    f"Config `compression.type` is `{value}`; use one of "
                    f"{', '.join(f'`{c}`' for c in COMPRESSION_TYPES)}.",
                    key=key,
                )
            elif kind == "durability" and value not in ("interval", "sync"):
                raise InvalidConfigError(
                    f"Config `durability` is `{value}`; use `sync` (fsync before every ack) "
                    "or `interval` (fsync by flush.ms / flush.messages).",
                    key=key,
                )

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @staticmethod
    def known_keys() -> tuple[str, ...]:
        return tuple(_KEYS)

    @classmethod
    def from_kafka(cls, configs: Mapping[str, str], *, base: LogConfig | None = None) -> LogConfig:
        """Parse Kafka-style string configs on top of `base` (default: Kafka's defaults)."""
        return (base or cls()).with_changes(configs)

    def with_changes(self, changes: Mapping[str, str | None]) -> LogConfig:
        """A copy with `changes` applied; a `None` value resets that key to the default."""
        updates: dict[str, object] = {}
        defaults = LogConfig()
        for key, raw in changes.items():
            if key not in _KEYS:
                raise InvalidConfigError(
                    f"Unknown topic config `{key}`; known keys: {', '.join(sorted(_KEYS))}.",
                    key=key,
                )
            attr, kind, _ = _KEYS[key]
            if raw is None:
                updates[attr] = getattr(defaults, attr)
            elif kind in ("int", "long"):
                try:
                    updates[attr] = int(str(raw).strip())
                except ValueError:
                    raise InvalidConfigError(
                        f"Config `{key}` must be an integer, got `{raw}`.", key=key
                    ) from None
            elif kind == "double":
                try:
                    updates[attr] = float(str(raw).strip())
                except ValueError:
                    raise InvalidConfigError(
                        f"Config `{key}` must be a number between 0 and 1, got `{raw}`.", key=key
                    ) from None
            elif kind == "policy":
                parts = sorted(p.strip() for p in str(raw).split(",") if p.strip())
                updates[attr] = ",".join(parts)
            else:
                updates[attr] = str(raw).strip()
        return replace(self, **updates)

    def to_kafka(self) -> dict[str, str]:
        """Every key as Kafka would describe it (DescribeConfigs)."""
        return {key: str(getattr(self, attr)) for key, (attr, _, _) in _KEYS.items()}

    def overrides(self, base: LogConfig) -> dict[str, str]:
        """The keys whose value differs from `base`."""
        mine, theirs = self.to_kafka(), base.to_kafka()
        return {k: v for k, v in mine.items() if theirs[k] != v}


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """Broker-wide log cleaner settings, with Kafka's names and defaults."""

    # The most memory one cleaning pass holds for its key -> offset map
    # (Kafka's SkimpyOffsetMap: 24 bytes a key); a pass that fills it stops there
    # and the next one goes on.
    dedupe_buffer_size: int = 128 * 1024 * 1024

    @classmethod
    def from_kafka(cls, configs: Mapping[str, str]) -> CleanerConfig:
        key = "log.cleaner.dedupe.buffer.size"
        raw = configs.get(key)
        if raw is None:
            return cls()
        try:
            value = int(str(raw).strip())
        except ValueError:
            raise InvalidConfigError(
                f"Config `{key}` must be an integer, got `{raw}`.", key=key
            ) from None
        if value < 1024:
            raise InvalidConfigError(
                f"Config `{key}` is `{value}`; it must be at least 1024 bytes.", key=key
            )
        return cls(dedupe_buffer_size=value)


assert {f.name for f in fields(LogConfig)} == {a for a, _, _ in _KEYS.values()}
