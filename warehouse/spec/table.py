"""Table specs: what one `layers/<layer>/<name>.yml` declares (README, "A tour").

Pydantic only; no Spark import. Every model is frozen and forbids unknown keys,
so a typo in a YAML file fails at load with its file and field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

LAYERS: tuple[str, ...] = ("ods", "dwd", "dws", "ads")
"""Layers in dependency order: a table reads Kafka, its own layer or an earlier one."""

NAME_RE = re.compile(r"^[a-z_][a-z0-9_]*$")
TOPIC_RE = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
# Spark interval strings as used by withWatermark/window: "10 minutes", "1 hour", "30 seconds".
INTERVAL_RE = re.compile(
    r"^\s*\d+\s+(millisecond|second|minute|hour|day|week)s?\s*$", re.IGNORECASE
)

KafkaFormat = Literal["json", "raw", "debezium-json", "upsert-json"]
OnViolation = Literal["warn", "drop", "quarantine", "fail"]
ReadMode = Literal["append", "changes"]


class Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def _check_interval(value: str) -> str:
    if not INTERVAL_RE.match(value):
        raise ValueError(
            f"`{value}` is not an interval; write a number and a unit, e.g. `10 minutes`"
        )
    return value.strip()


def _check_positive_interval(value: str, zero: str, example: str) -> str:
    """`value` as `_check_interval` gives it, refused when zero (`zero` says why)."""
    value = _check_interval(value)
    if int(value.split()[0]) == 0:
        raise ValueError(f"`{value}` {zero}; give a positive interval, e.g. `{example}`")
    return value


def _check_name(value: str) -> str:
    if not NAME_RE.match(value):
        raise ValueError(
            f"`{value}` is not a valid name; use lower-case letters, digits and `_`, "
            "starting with a letter or `_`"
        )
    return value


DEFAULT_CLUSTER = "default"
"""The name of the cluster `kafka.bootstrap` names (`cluster: default` in a table)."""


def _check_cluster(value: str) -> str:
    if not NAME_RE.match(value):
        raise ValueError(
            f"`{value}` is not a cluster name; use lower-case letters, digits and `_` "
            "(`default`, or a name of `kafka.clusters` in conf/<env>.yml)"
        )
    return value


class KafkaSource(Spec):
    """Read one topic, a list of topics, or a topic pattern."""

    topic: str | None = None
    topics: list[str] | None = None
    pattern: str | None = None
    starting_offsets: Literal["earliest", "latest"] | dict[str, dict[str, int]] = "earliest"
    format: KafkaFormat = "json"
    schema_: str | None = Field(default=None, alias="schema")
    connect_schema: bool = False
    """`debezium-json` or `upsert-json` without `schema`: the records carry their Kafka
    Connect schema (`{"schema": ..., "payload": ...}`), read from the topic when the
    query starts."""
    max_offsets_per_trigger: int | None = Field(default=None, gt=0)
    max_bytes_per_trigger: int | None = Field(default=None, gt=0)
    """Bytes (keys and values) a micro-batch reads at most, turned into records by the
    size of the topics' newest records when the query starts (both engines)."""
    on_data_loss: Literal["fail", "skip"] = "fail"
    options: dict[str, str] = Field(default_factory=dict)
    cluster: str = DEFAULT_CLUSTER
    """The Kafka cluster the topics are on: `default` (`kafka.bootstrap`) or a name of
    `kafka.clusters`."""
    clusters: list[str] | None = None
    """Federation: the same topics read from each of these clusters at once (`default` or
    names of `kafka.clusters`, at least two); each row carries its cluster in `_cluster`.
    Instead of `cluster`."""

    _cluster = field_validator("cluster")(_check_cluster)

    @field_validator("clusters")
    @classmethod
    def _federation(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return None
        for c in v:
            _check_cluster(c)
        twice = sorted({c for c in v if v.count(c) > 1})
        if twice:
            raise ValueError(
                f"names the cluster {', '.join(f'`{c}`' for c in twice)} more than once; "
                "name each cluster once"
            )
        if len(v) < 2:
            raise ValueError(
                "federation reads at least two clusters; for one, write `cluster: NAME`"
            )
        return v

    @model_validator(mode="after")
    def _one_subscription(self) -> KafkaSource:
        if self.clusters is not None and "cluster" in self.model_fields_set:
            raise ValueError("give `cluster` (one cluster) or `clusters` (federation), not both")
        given = [k for k in ("topic", "topics", "pattern") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of `topic`, `topics` or `pattern`"
                + (f" (got {', '.join(f'`{g}`' for g in given)})" if given else "")
            )
        for t in [self.topic] if self.topic else (self.topics or []):
            if not TOPIC_RE.match(t) or t in (".", ".."):
                raise ValueError(
                    f"`{t}` is not a valid Kafka topic name "
                    "(letters, digits, `.`, `_`, `-`; at most 249 characters)"
                )
        if self.format == "json" and not self.schema_:
            raise ValueError(
                "format `json` needs `schema: NAME` (a file in `schemas/`)"
                + (
                    "; `connect_schema` applies to `debezium-json` and `upsert-json`"
                    if self.connect_schema
                    else ""
                )
            )
        return self

    @property
    def topic_list(self) -> list[str]:
        return [self.topic] if self.topic else list(self.topics or [])

    @property
    def federated(self) -> bool:
        """True when the topics are read from several clusters (`clusters`)."""
        return self.clusters is not None

    @property
    def cluster_list(self) -> list[str]:
        """The clusters the topics are read from, in the order the query reads them: a
        federation's sorted by name (so its checkpoint's sources keep their order whatever
        order the file lists them in), else the one `cluster`."""
        return sorted(self.clusters) if self.clusters is not None else [self.cluster]


class JoinStream(Spec):
    """Another table read as a stream for a stream–stream join; named by its table in SQL."""

    table: str
    watermark: Watermark | None = None


class TopicSource(Spec):
    """`source: {kafka: {...}}`: the table reads Kafka topics."""

    kafka: KafkaSource

    union_tag: ClassVar[str] = "from_kafka"

    @property
    def upstream_tables(self) -> list[str]:
        return []

    @property
    def topics(self) -> list[str]:
        """The topics it names (none for a `pattern`)."""
        return self.kafka.topic_list


class TableSource(Spec):
    """`source: {table: NAME, read: append|changes}`: the table reads another table's
    versions as a stream, with other tables' streams joined (`join_streams`)."""

    table: str
    read: ReadMode = "append"
    max_versions_per_trigger: int | None = Field(default=None, gt=0)
    join_streams: list[JoinStream] = Field(default_factory=list)

    union_tag: ClassVar[str] = "from_table"

    @property
    def upstream_tables(self) -> list[str]:
        return [self.table, *(j.table for j in self.join_streams)]

    @property
    def topics(self) -> list[str]:
        return []


def _source_tag(value: Any) -> str | None:
    if isinstance(value, dict):
        return TopicSource.union_tag if "kafka" in value else TableSource.union_tag
    if isinstance(value, TopicSource | TableSource):
        return value.union_tag
    return None


Source = Annotated[
    Annotated[TopicSource, Tag(TopicSource.union_tag)]
    | Annotated[TableSource, Tag(TableSource.union_tag)],
    Discriminator(_source_tag),
]
"""A table's source: `TopicSource` or `TableSource`, told apart by the key `kafka`."""

_TABLE_ONLY = ("read", "join_streams", "max_versions_per_trigger")


def _check_source_keys(data: Mapping[str, Any]) -> None:
    """The keys of a `source` mapping name one kind of source: `kafka`, or `table` with
    the options of a table source. Raises `ValueError` saying which keys are wrong."""
    if ("kafka" in data) == ("table" in data):
        raise ValueError("give exactly one of `kafka` or `table`")
    if "kafka" not in data:
        return
    given = [k for k in _TABLE_ONLY if data.get(k) not in (None, [], "append")]
    if given:
        hint = (
            " A Kafka source takes no stateful operators: land the raw topic in an ODS "
            "table and do the join in a DWD table that reads it."
            if "join_streams" in given
            else ""
        )
        raise ValueError(
            f"{', '.join(f'`{g}`' for g in given)} apply to table sources only, "
            f"not to `kafka`.{hint}"
        )


class Transform(Spec):
    """SQL inline, SQL in a file beside the YAML, or a Python callable `module:function`."""

    sql: str | None = None
    sql_file: str | None = None
    python: str | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Transform:
        given = [k for k in ("sql", "sql_file", "python") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError("give exactly one of `sql`, `sql_file` or `python`")
        if self.python and not re.match(r"^[\w.]+:\w+$", self.python):
            raise ValueError(
                f"`{self.python}` is not a Python reference; write `package.module:function`"
            )
        return self


class Watermark(Spec):
    column: str
    delay: str

    _delay = field_validator("delay")(_check_interval)


class Dedupe(Spec):
    """Drop repeated keys (within the watermark when the table has one)."""

    keys: list[str] = Field(min_length=1)


class Window(Spec):
    column: str
    size: str
    slide: str | None = None

    _size = field_validator("size")(_check_interval)

    @field_validator("slide")
    @classmethod
    def _slide(cls, v: str | None) -> str | None:
        return None if v is None else _check_interval(v)


class Aggregate(Spec):
    window: Window | None = None
    group_by: list[str] = Field(default_factory=list)
    measures: dict[str, str] = Field(min_length=1)

    @field_validator("measures")
    @classmethod
    def _measure_names(cls, v: dict[str, str]) -> dict[str, str]:
        for name in v:
            _check_name(name)
        return v


class _SinkBase(Spec):
    partition_by: list[str] = Field(default_factory=list)


class AppendSink(_SinkBase):
    mode: Literal["append"] = "append"


class UpsertSink(_SinkBase):
    """SCD type 1: one row per key; the latest by `sequence_by` wins; deletes remove the row.

    With `sequence_by`, a deleted key is remembered for `tombstone_retention` (an
    interval, `7 days` by default), so a change older than the delete arriving later
    does not bring the key back (docs/cdc.md, "SCD type 1")."""

    mode: Literal["upsert"]
    keys: list[str] = Field(min_length=1)
    sequence_by: str | None = None
    tombstone_retention: str = "7 days"

    @field_validator("tombstone_retention")
    @classmethod
    def _retention(cls, v: str) -> str:
        return _check_positive_interval(v, "keeps no tombstone", "7 days")


class Scd2Sink(_SinkBase):
    """SCD type 2: history per key with `valid_from`, `valid_to`, `is_current`."""

    mode: Literal["scd2"]
    keys: list[str] = Field(min_length=1)
    sequence_by: str


Sink = Annotated[AppendSink | UpsertSink | Scd2Sink, Field(discriminator="mode")]


def sink_keys(sink: AppendSink | UpsertSink | Scd2Sink) -> list[str]:
    """The columns a keyed sink (upsert, SCD2) places rows by; none for an append."""
    return list(sink.keys) if isinstance(sink, UpsertSink | Scd2Sink) else []


class Expectation(Spec):
    """One great-expectations expectation: `{expect_x: {kwargs}, on_violation: ...}` in YAML."""

    type: str
    kwargs: dict[str, Any] = Field(default_factory=dict)
    on_violation: OnViolation = "warn"
    name: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_yaml_shape(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "type" in data:
            return data
        rest = {k: v for k, v in data.items() if k not in ("on_violation", "name")}
        types = [k for k in rest if str(k).startswith("expect_")]
        if len(types) != 1 or len(rest) != 1:
            raise ValueError(
                "an expectation is one `expect_...: {arguments}` entry, optionally with "
                f"`on_violation` and `name` (got keys {', '.join(f'`{k}`' for k in data)})"
            )
        kwargs = rest[types[0]] or {}
        out: dict[str, Any] = {"type": types[0], "kwargs": kwargs}
        for k in ("on_violation", "name"):
            if k in data:
                out[k] = data[k]
        return out

    def to_yaml(self) -> dict[str, Any]:
        out: dict[str, Any] = {self.type: dict(self.kwargs)}
        if self.on_violation != "warn":
            out["on_violation"] = self.on_violation
        if self.name:
            out["name"] = self.name
        return out


class Trigger(Spec):
    """How often the query runs when not `--once`: `{interval: 10 seconds}`; none = back to back."""

    interval: str | None = None

    @field_validator("interval")
    @classmethod
    def _interval(cls, v: str | None) -> str | None:
        return None if v is None else _check_interval(v)


class Snapshots(Spec):
    """How the table's SQL reads the other tables it names (stream-static joins).

    By default every micro-batch reads each of them at its newest version. With
    `max_age`, each is kept in Spark's cache and read again once the copy is older
    than that, so a batch joins a copy at most `max_age` old: no Delta log read or
    state rebuild in each batch's plan (docs/architecture.md, "Snapshots")."""

    max_age: str

    @field_validator("max_age")
    @classmethod
    def _max_age(cls, v: str) -> str:
        return _check_positive_interval(
            v,
            "would read the tables again at every batch, which is the default "
            "(leave `snapshots` out for that)",
            "10 seconds",
        )


class KafkaPublish(Spec):
    topic: str
    partitions: int = Field(default=1, gt=0)
    format: Literal["json"] = "json"
    cluster: str = DEFAULT_CLUSTER
    """The Kafka cluster the topic is on: `default` or a name of `kafka.clusters`."""

    _cluster = field_validator("cluster")(_check_cluster)

    @field_validator("topic")
    @classmethod
    def _topic(cls, v: str) -> str:
        if not TOPIC_RE.match(v):
            raise ValueError(f"`{v}` is not a valid Kafka topic name")
        return v


class Publish(Spec):
    kafka: KafkaPublish


class DeadLetterKafka(Spec):
    """A dead-letter topic: each quarantined record's original key and value, with the
    reason, the table and the source coordinates in headers (docs/quality.md)."""

    topic: str
    partitions: int = Field(default=1, gt=0)
    cluster: str | None = None
    """The Kafka cluster the topic is on; None: the cluster the table reads."""

    @field_validator("cluster")
    @classmethod
    def _cluster(cls, v: str | None) -> str | None:
        return None if v is None else _check_cluster(v)

    @field_validator("topic")
    @classmethod
    def _topic(cls, v: str) -> str:
        if not TOPIC_RE.match(v) or v in (".", ".."):
            raise ValueError(
                f"`{v}` is not a valid Kafka topic name "
                "(letters, digits, `.`, `_`, `-`; at most 249 characters)"
            )
        return v


class Quarantine(Spec):
    """`quarantine: {kafka: {topic: ...}}`: where quarantined records go besides the
    table's quarantine table."""

    kafka: DeadLetterKafka


class TableSpec(Spec):
    """One table of the warehouse. YAML files and Python definitions both produce this."""

    table: str
    description: str | None = None
    source: Source
    transform: Transform | None = None
    watermark: Watermark | None = None
    dedupe: Dedupe | None = None
    aggregate: Aggregate | None = None
    sink: Sink = Field(default_factory=AppendSink)
    expectations: list[Expectation] = Field(default_factory=list)
    trigger: Trigger | None = None
    snapshots: Snapshots | None = None
    publish: Publish | None = None
    quarantine: Quarantine | None = None

    _name = field_validator("table")(_check_name)

    @field_validator("source", mode="before")
    @classmethod
    def _one_source(cls, v: Any) -> Any:
        if isinstance(v, Mapping):
            _check_source_keys(v)
        return v

    @model_validator(mode="before")
    @classmethod
    def _default_sink_mode(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("sink"), dict):
            if "mode" not in data["sink"]:
                data = {**data, "sink": {"mode": "append", **data["sink"]}}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> TableSpec:
        if self.publish is not None and self.sink.mode == "append":
            raise ValueError(
                "`publish` needs keys: use `sink: {mode: upsert, keys: [...]}` "
                "(the topic is compacted by the sink keys)"
            )
        if self.aggregate and self.aggregate.window and not self.watermark:
            raise ValueError("a windowed `aggregate` needs a `watermark` on its event-time column")
        return self

    @property
    def upstream_tables(self) -> list[str]:
        return self.source.upstream_tables

    def to_yaml(self) -> dict[str, Any]:
        """The spec as a YAML table file would write it (defaults left out); loads back equal."""
        doc = self.model_dump(mode="json", by_alias=True, exclude_defaults=True)
        if self.expectations:
            doc["expectations"] = [e.to_yaml() for e in self.expectations]
        return doc


JoinStream.model_rebuild()
TableSource.model_rebuild()


class TableDefinition(Spec):
    """A table spec together with where it was declared (layer folder and file)."""

    spec: TableSpec
    layer: Literal["ods", "dwd", "dws", "ads"]
    path: str
    """The declaring file, relative to the project folder (`layers/dwd/orders.yml`)."""
    sql: str | None = None
    """The SQL transform's text, from `transform.sql`, `transform.sql_file` or `<stem>.sql`."""
    sql_path: str | None = None
    """The file the SQL came from (relative to the project), or None when inline."""
    static_tables: list[str] = Field(default_factory=list)
    """Project tables the SQL reads besides `source` and join streams (latest snapshot)."""
    payload_ddl: str | None = None
    """Kafka sources: the payload schema (`schemas/NAME`) as a Spark DDL string; the
    fields a record must have (JSON Schema `required`, DDL `NOT NULL`) are `NOT NULL`."""

    @property
    def name(self) -> str:
        return self.spec.table

    @property
    def layer_index(self) -> int:
        return LAYERS.index(self.layer)

    @property
    def source_cluster(self) -> str | None:
        """The Kafka cluster the table reads (None: it reads a table; for a federation,
        the first of `source_clusters`)."""
        src = self.spec.source
        return src.kafka.cluster_list[0] if isinstance(src, TopicSource) else None

    @property
    def source_clusters(self) -> list[str]:
        """Every Kafka cluster the table reads (one, several for a federation, none when
        it reads a table)."""
        src = self.spec.source
        return src.kafka.cluster_list if isinstance(src, TopicSource) else []

    @property
    def dead_letter_cluster(self) -> str | None:
        """The Kafka cluster of the table's dead-letter topic (None: it has none): its own
        `cluster`, else the cluster the table reads."""
        q = self.spec.quarantine
        if q is None:
            return None
        return q.kafka.cluster or self.source_cluster or DEFAULT_CLUSTER

    @property
    def kafka_clusters(self) -> list[str]:
        """Every Kafka cluster the table reads or writes, each once."""
        found = [*self.source_clusters, self.dead_letter_cluster]
        if self.spec.publish is not None:
            found.append(self.spec.publish.kafka.cluster)
        return list(dict.fromkeys(c for c in found if c is not None))

    @property
    def python(self) -> str | None:
        """The Python transform reference `module:function`, if the transform is Python."""
        return self.spec.transform.python if self.spec.transform else None
