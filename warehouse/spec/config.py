"""Environment settings: `conf/<env>.yml` (README, "A tour"; docs/cluster.md).

Precedence: keyword overrides > `WAREHOUSE__SECTION__KEY` environment variables >
the YAML file > defaults. (The design calls the variables *overrides* of the
file, so they sit above it.) `${VAR}` and `${VAR:-default}` in the YAML are
replaced from the environment, which is how secrets stay out of the file.
Secrets are `SecretStr` and print as `**********`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)

from streams.storage import DEFAULT_LEASE_SECONDS, StorageSettings
from warehouse.spec.table import DEFAULT_CLUSTER, NAME_RE

Engine = Literal["auto", "native", "python"]

ENV_PREFIX = "WAREHOUSE__"
_VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _property_text(value: Any) -> Any:
    """A Kafka, librdkafka or Spark property value as those read it: `3` as `3`, `true`
    as `true` (lower-case, as Java's `Boolean.parseBoolean` and librdkafka write it),
    `0.5` as `0.5`. Anything else is left for the `str` check to name."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return value


Properties = dict[str, Annotated[str, BeforeValidator(_property_text)]]
"""A map of property names to values as YAML gives them: text, numbers and booleans
(`num.partitions: 3`, `auto.create.topics.enable: false`), all kept as text."""


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class KafkaSecurity(Settings):
    protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    username: str | None = None
    password: SecretStr | None = None
    ssl_ca_location: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _blank_is_unset(cls, data: Any) -> Any:
        # `${KAFKA_PASSWORD:-}` in a shared conf file means "not set" when the variable is absent.
        if isinstance(data, dict):
            return {k: (None if v == "" and k != "protocol" else v) for k, v in data.items()}
        return data

    def client_config(self) -> dict[str, str]:
        """librdkafka properties for this security setting (secrets revealed here only)."""
        conf = {"security.protocol": self.protocol}
        if self.sasl_mechanism:
            conf["sasl.mechanism"] = self.sasl_mechanism
        if self.username is not None:
            conf["sasl.username"] = self.username
        if self.password is not None:
            conf["sasl.password"] = self.password.get_secret_value()
        if self.ssl_ca_location:
            conf["ssl.ca.location"] = self.ssl_ca_location
        return conf


class EmbeddedBroker(Settings):
    """The bundled broker behind `bootstrap: embedded`, started on demand."""

    host: str = "127.0.0.1"
    port: int = Field(default=9092, ge=0, le=65535)
    data_dir: str | None = None  # default: <warehouse_root>/broker
    config: Properties = Field(default_factory=dict)
    """Broker properties (`num.partitions: 3`), written as Kafka's server.properties."""


class KafkaCluster(Settings):
    """A named Kafka cluster of `kafka.clusters` besides the default one: a table reads
    from it, publishes or sends dead letters to it by `cluster: NAME`."""

    bootstrap: str = Field(min_length=1)
    security: KafkaSecurity = Field(default_factory=KafkaSecurity)
    client: Properties = Field(default_factory=dict)  # extra librdkafka properties

    @field_validator("bootstrap")
    @classmethod
    def _not_embedded(cls, v: str) -> str:
        if v.strip() == "embedded":
            raise ValueError(
                "`embedded` (the bundled broker) can only be the default cluster "
                "(`kafka.bootstrap`); give this cluster's servers as `host:port[,host:port]`"
            )
        return v

    def client_config(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """librdkafka properties of every client: security, then `client`, then `extra`."""
        return _client_config(self.security, self.client, extra)


def _client_config(
    security: KafkaSecurity, client: Mapping[str, str], extra: Mapping[str, str] | None
) -> dict[str, str]:
    """A cluster's librdkafka properties: its security, then its `client`, then `extra`."""
    return {**security.client_config(), **client, **(extra or {})}


class KafkaSettings(Settings):
    bootstrap: str = "embedded"
    security: KafkaSecurity = Field(default_factory=KafkaSecurity)
    client: Properties = Field(default_factory=dict)  # extra librdkafka properties
    embedded: EmbeddedBroker = Field(default_factory=EmbeddedBroker)
    clusters: dict[str, KafkaCluster] = Field(default_factory=dict)
    """More clusters by name (`eu: {bootstrap: ..., security: ...}`); the one above is
    `default`."""

    @field_validator("clusters", mode="before")
    @classmethod
    def _cluster_names(cls, v: Any) -> Any:
        # Before the clusters' own fields: a bad name is reported even when they are bad too.
        if not isinstance(v, Mapping):
            return v
        said = []
        for name in v:
            if name == DEFAULT_CLUSTER:
                said.append(
                    f"`{DEFAULT_CLUSTER}` names the cluster of `kafka.bootstrap`; give this "
                    "cluster another name"
                )
            elif not isinstance(name, str) or not NAME_RE.match(name):
                said.append(
                    f"`{name}` is not a cluster name; use lower-case letters, digits and `_`, "
                    "starting with a letter or `_` (e.g. `eu`, `payments_dc`)"
                )
        if said:
            raise ValueError("; ".join(said))
        return v

    @property
    def is_embedded(self) -> bool:
        return self.bootstrap == "embedded"

    @property
    def cluster_names(self) -> list[str]:
        """`default`, then the named clusters in the file's order."""
        return [DEFAULT_CLUSTER, *self.clusters]

    def client_config(
        self, extra: Mapping[str, str] | None = None, *, cluster: str = DEFAULT_CLUSTER
    ) -> dict[str, str]:
        """librdkafka properties of every client of `cluster`: its security, then its
        `client`, then `extra`."""
        if cluster != DEFAULT_CLUSTER:
            return self.clusters[cluster].client_config(extra)
        return _client_config(self.security, self.client, extra)

    def declared_at(self, cluster: str) -> str | None:
        """The field that declares `cluster`: `kafka.bootstrap` for `default`,
        `kafka.clusters.<name>` for a named one; None when there is no such cluster."""
        if cluster == DEFAULT_CLUSTER:
            return "kafka.bootstrap"
        return f"kafka.clusters.{cluster}" if cluster in self.clusters else None

    def bootstrap_of(self, cluster: str, default: str | None) -> str | None:
        """`cluster`'s bootstrap servers: `default` (the default cluster's, as resolved:
        an `embedded` one is the running broker's) for `default`, else the named
        cluster's."""
        return default if cluster == DEFAULT_CLUSTER else self.clusters[cluster].bootstrap


class Engines(Settings):
    kafka: Engine = "auto"
    delta: Engine = "auto"
    parse: Literal["auto", "spark"] = "auto"
    """How Kafka JSON is parsed: `auto` types flat JSON in Arrow inside Spark's tasks
    where a table allows it (docs/architecture.md, "The Arrow path"), `spark` always
    with Spark's `from_json`."""


class SparkSettings(Settings):
    master: str = "local[*]"
    remote: str | None = None
    """A Spark Connect server (`sc://host:15002`, Spark's `spark.remote`): the sessions
    the framework starts connect to it instead of starting Spark here. `master`, the JVM's
    settings and the native jars are then the server's; `conf`'s `spark.sql.*` settings
    are set on the session."""
    app_name: str = "warehouse"
    conf: Properties = Field(default_factory=lambda: {"spark.sql.shuffle.partitions": "4"})
    native_jars: bool = True
    """Sessions the framework starts put the cached native jars (Spark's `kafka` format,
    delta-spark) on the class path; `make install` caches them. A session that already
    runs (notebook, `spark-submit`) is used as it is."""
    jars_cache: str | None = None
    """Where the native jars are cached (default `~/.cache/spark-warehouse/jars`)."""
    concurrent_batches: Annotated[int, Field(ge=0)] | Literal["auto"] = "auto"
    """How many micro-batches of a continuous run write at once; a free turn goes to
    the waiting table deepest in the graph (`warehouse.runtime.gate`). `auto`: the
    cores of a local master, no limit on any other; 0: no limit. A `--once` run runs
    this many queries at once (each runs its batches one after the other), a table
    once the tables of the run it reads have ended; there `auto` on any other master
    or on Spark Connect is 2 (`warehouse.runtime.live.ONCE_SLOTS_ELSEWHERE`)."""


_IDENTIFIER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
LAYER_PLACEHOLDER = "{layer}"


class CatalogSettings(Settings):
    """Tables by name (`catalog:`; docs/databricks.md, "Unity Catalog names"): every table
    and its quarantine is registered as `<catalog>.<schema>.<table>` in the session's
    catalog once its first batch has committed. `schema` may hold `{layer}` (one schema per
    layer: `"{layer}"`, `"wh_{layer}"`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    catalog: str = "spark_catalog"
    """`spark_catalog`: Spark's session catalog (locally its Hive metastore under
    `<warehouse_root>/_catalog`); on Databricks a Unity Catalog catalog."""
    schema_: str = Field(alias="schema")

    @field_validator("catalog")
    @classmethod
    def _catalog(cls, v: str) -> str:
        if not _IDENTIFIER_RE.match(v):
            raise ValueError(
                f"`{v}` is not a catalog name; use letters, digits and `_`, "
                "not starting with a digit (e.g. `spark_catalog`, `main`)"
            )
        return v

    @field_validator("schema_")
    @classmethod
    def _schema(cls, v: str) -> str:
        if not _IDENTIFIER_RE.match(v.replace(LAYER_PLACEHOLDER, "layer")):
            raise ValueError(
                f"`{v}` is not a schema name; use letters, digits and `_`, optionally "
                '`{layer}` for one schema per layer (e.g. `warehouse`, `"{layer}"`, '
                "`wh_{layer}`)"
            )
        return v

    def schema_for(self, layer: str) -> str:
        return self.schema_.replace(LAYER_PLACEHOLDER, layer)

    def name(self, table: str, layer: str) -> str:
        """The table's three-part name: `catalog.schema.table`."""
        return f"{self.catalog}.{self.schema_for(layer)}.{table}"


Secrets = dict[str, Annotated[SecretStr, BeforeValidator(_property_text)]]
"""A map of property names to values that may be secrets: printed as `**********`."""


class StorageSection(Settings):
    """What the standard variables (`AWS_*`, ...) cannot say about where the tables live
    (docs/cluster.md). Every field is optional: with a root on S3, the AWS variables alone
    are enough."""

    endpoint: str | None = None
    """An S3-compatible endpoint (`http://host:9000`); default `AWS_ENDPOINT_URL`."""
    region: str | None = None
    """Default `AWS_REGION`."""
    path_style: bool | None = None
    """Path-style addressing; default: on with a custom endpoint, off on AWS."""
    options: Secrets = Field(default_factory=dict)
    """More object-store options for the Python side (delta-rs and obstore keys:
    `aws_*`, `azure_*`, `google_*`)."""
    hadoop: Secrets = Field(default_factory=dict)
    """More Hadoop properties for sessions the framework starts (`fs.s3a.*`,
    `fs.azure.*`, `fs.gs.*`)."""
    lease_seconds: float = Field(default=DEFAULT_LEASE_SECONDS, gt=2)
    """How long a table's lease on object storage holds without renewal: after its
    holder dies, the next process waits at most this long."""

    @model_validator(mode="before")
    @classmethod
    def _blank_is_unset(cls, data: Any) -> Any:
        # `endpoint: ${S3_ENDPOINT:-}` in a shared conf file means "not set" when absent.
        if isinstance(data, dict):
            return {k: (None if v == "" else v) for k, v in data.items()}
        return data


class QualitySettings(Settings):
    """The quality events of `<root>/tables/_quality_events` (docs/quality.md)."""

    events_retention: str = "30 days"
    """How long events are kept (an interval); Delta's default log retention."""

    @field_validator("events_retention")
    @classmethod
    def _retention(cls, v: str) -> str:
        from warehouse.spec.expectations import interval_seconds

        if interval_seconds(v) <= 0:
            raise ValueError(f"`{v}` keeps no event; give a positive interval, e.g. `30 days`")
        return v

    @property
    def events_retention_seconds(self) -> float:
        from warehouse.spec.expectations import interval_seconds

        return interval_seconds(self.events_retention)


_ALIAS_RE = re.compile(r"[A-Za-z0-9_-]+")
_FLOW_RE = re.compile(r"^\s*([^\s>-][^\s>]*?)\s*->\s*([^\s>]+)\s*$")


class MirrorCluster(Settings):
    """A Kafka cluster MirrorMaker 2 reads from or writes to, by its alias (the key in
    `mirror.clusters`, and the prefix of the topics mirrored from it), for a cluster the
    project's tables do not use. A flow may also name one of the project's Kafka clusters
    (`default`, a name of `kafka.clusters`), which brings its own bootstrap, security
    and client properties."""

    bootstrap: str = Field(min_length=1)
    security: KafkaSecurity = Field(default_factory=KafkaSecurity)
    client: Properties = Field(default_factory=dict)
    """More Java client properties for every client MirrorMaker opens on this cluster."""


class MirrorFlow(Settings):
    """What one `spoke -> hub` flow mirrors."""

    topics: list[str] | str
    """Topic names (`[orders, payments]`, each matched exactly) or one Java regex
    (`"orders|payments\\..*"`)."""

    @field_validator("topics")
    @classmethod
    def _some_topic(cls, v: list[str] | str) -> list[str] | str:
        if isinstance(v, str):
            if not v.strip():
                raise ValueError("an empty regex mirrors nothing; name topics or give a regex")
            try:
                re.compile(v)
            except re.error as e:
                raise ValueError(f"`{v}` is not a regex ({e})") from None
            return v
        if not v:
            raise ValueError("an empty list mirrors nothing; name at least one topic")
        bad = [t for t in v if not t or "," in t or t.strip() != t]
        if bad:
            raise ValueError(f"{', '.join(f'`{t}`' for t in bad)}: not a topic name")
        return v


class MirrorSettings(Settings):
    """`warehouse mirror`: MirrorMaker 2 in dedicated mode, flows `spoke -> hub`, exactly
    once into each target (docs/channels.md, "Hub and spoke")."""

    clusters: dict[str, MirrorCluster] = Field(default_factory=dict)
    """Clusters only MirrorMaker uses, by alias; optional when the flows name the
    project's Kafka clusters."""
    flows: dict[str, MirrorFlow] = Field(default_factory=dict)
    """`"eu -> hub": {topics: [orders]}`: the hub gets `eu.orders`. Each name is an alias
    of `mirror.clusters` or one of the project's Kafka clusters (`default`, a name of
    `kafka.clusters`)."""
    replication_factor: Annotated[int, Field(ge=1)] | None = None
    """Replication factor of the topics MirrorMaker creates (mirrored and internal);
    default: MirrorMaker's own (2 for mirrored topics, 3 for its internal ones)."""
    properties: Properties = Field(default_factory=dict)
    """More MirrorMaker 2 properties, written last (`sync.topic.configs.enabled: false`,
    `eu->hub.tasks.max: 4`)."""
    work_dir: str | None = None
    """Where the generated properties file goes (default: `<warehouse_root>/mirror`, or
    a temporary folder when the root is not local)."""

    @field_validator("clusters")
    @classmethod
    def _aliases(cls, v: dict[str, MirrorCluster]) -> dict[str, MirrorCluster]:
        bad = [name for name in v if not _ALIAS_RE.fullmatch(name)]
        if bad:
            raise ValueError(
                f"cluster name {', '.join(f'`{n}`' for n in bad)}: use letters, digits, `_` "
                "and `-` only (the name prefixes mirrored topics: `<spoke>.<topic>`)"
            )
        return v

    @field_validator("flows")
    @classmethod
    def _flows(cls, v: dict[str, MirrorFlow]) -> dict[str, MirrorFlow]:
        # Whether a flow's clusters are declared needs `kafka` too: the loader checks it
        # once both have loaded (`warehouse.spec.checks.mirror_problems`).
        out: dict[str, MirrorFlow] = {}
        for key, flow in v.items():
            m = _FLOW_RE.match(key)
            if m is None:
                raise ValueError(f"flow `{key}`: write it `spoke -> hub` (two cluster names)")
            source, target = m.groups()
            if source == target:
                raise ValueError(f"flow `{key}`: a cluster cannot mirror into itself")
            normal = f"{source} -> {target}"
            if normal in out:
                raise ValueError(f"flow `{key}`: `{normal}` is given twice")
            out[normal] = flow
        return out

    def pairs(self) -> list[tuple[str, str, MirrorFlow]]:
        """The flows as (source, target, flow), in the file's order."""
        out = []
        for key, flow in self.flows.items():
            source, target = (part.strip() for part in key.split("->"))
            out.append((source, target, flow))
        return out

    def aliases(self) -> list[str]:
        """The clusters the flows name: those of `mirror.clusters` in its order, then the
        project's Kafka clusters in the flows' order."""
        named = dict.fromkeys(c for s, t, _ in self.pairs() for c in (s, t))
        return [
            *(c for c in self.clusters if c in named),
            *(c for c in named if c not in self.clusters),
        ]


class WarehouseConfig(Settings):
    """The one root settings object of a project environment."""

    warehouse_root: str = ".warehouse"
    """A local path (relative to the project folder) or a URI: `s3a://bucket/wh`,
    `s3://...`, `abfss://...`, `gs://...`, `hdfs://...`."""
    storage: StorageSection = Field(default_factory=StorageSection)
    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    engines: Engines = Field(default_factory=Engines)
    spark: SparkSettings = Field(default_factory=SparkSettings)
    quality: QualitySettings = Field(default_factory=QualitySettings)
    catalog: CatalogSettings | None = None
    """Tables by name in the session's catalog; None: tables are paths only."""
    mirror: MirrorSettings = Field(default_factory=MirrorSettings)

    def mirror_cluster_at(self, alias: str) -> str | None:
        """Where MirrorMaker's cluster `alias` is declared: `mirror.clusters.<alias>`, else
        the project's Kafka cluster of that name (`kafka.bootstrap` for `default`,
        `kafka.clusters.<alias>`); None when neither declares it. A name both declare
        does not load (`warehouse.spec.checks.mirror_problems`)."""
        if alias in self.mirror.clusters:
            return f"mirror.clusters.{alias}"
        return self.kafka.declared_at(alias)

    def storage_overrides(self) -> dict[str, Any]:
        """The `storage:` section as `StorageSettings.from_environ`'s keywords: only the
        fields it sets (secrets revealed here only)."""
        s = self.storage
        out: dict[str, Any] = {
            k: v for k, v in (("endpoint", s.endpoint), ("region", s.region)) if v is not None
        }
        if s.path_style is not None:
            out["path_style"] = s.path_style
        if s.options:
            out["options"] = {k: v.get_secret_value() for k, v in s.options.items()}
        if s.hadoop:
            out["hadoop"] = {k: v.get_secret_value() for k, v in s.hadoop.items()}
        if s.lease_seconds != DEFAULT_LEASE_SECONDS:
            out["lease_seconds"] = s.lease_seconds
        return out

    def storage_settings(self, environ: Mapping[str, str]) -> StorageSettings:
        """How this environment reaches its storage: the standard variables of `environ`
        with the `storage:` section over them (raises `StorageConfigError`)."""
        return StorageSettings.from_environ(environ, **self.storage_overrides())

    def root_location(self, project_dir: Path) -> str:
        """`warehouse_root` as an absolute location: a URI as written (no trailing `/`),
        a path resolved against the project folder."""
        root = self.warehouse_root
        if "://" in root and not root.startswith("file://"):
            return root.rstrip("/")
        path = Path(root.removeprefix("file://")).expanduser()
        return str((path if path.is_absolute() else project_dir / path).resolve())


def interpolate(value: Any, environ: Mapping[str, str]) -> Any:
    """Replace `${VAR}` / `${VAR:-default}` in every string of a parsed YAML document."""
    if isinstance(value, str):

        def sub(m: re.Match[str]) -> str:
            name, default = m.group(1), m.group(2)
            if name in environ:
                return environ[name]
            if default is not None:
                return default
            raise KeyError(name)

        return _VAR_RE.sub(sub, value)
    if isinstance(value, dict):
        return {k: interpolate(v, environ) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, environ) for v in value]
    return value


def env_overrides(environ: Mapping[str, str]) -> dict[str, Any]:
    """`WAREHOUSE__KAFKA__BOOTSTRAP=h:9092` -> `{"kafka": {"bootstrap": "h:9092"}}`.

    Keys are lower-cased except below `conf`/`client`/`config` maps, whose keys
    (Spark and librdkafka property names) are taken as written after the prefix.
    """
    out: dict[str, Any] = {}
    for key, value in environ.items():
        if not key.startswith(ENV_PREFIX):
            continue
        parts = key[len(ENV_PREFIX) :].split("__")
        path: list[str] = []
        for i, part in enumerate(parts):
            if i > 0 and path[-1] in ("conf", "client", "config"):
                path.append("__".join(parts[i:]))
                break
            path.append(part.lower())
        node = out
        for p in path[:-1]:
            node = node.setdefault(p, {})
        node[path[-1]] = value
    return out


def deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def resolve_config(
    document: Mapping[str, Any] | None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> WarehouseConfig:
    """Build the settings from a parsed `conf/<env>.yml`, the environment and overrides.

    Raises `KeyError(var)` for a `${VAR}` with no value and pydantic's
    `ValidationError` for bad fields; the loader turns both into located errors.
    """
    env = os.environ if environ is None else environ
    data = interpolate(dict(document or {}), env)
    data = deep_merge(data, env_overrides(env))
    data = deep_merge(data, dict(overrides or {}))
    return WarehouseConfig.model_validate(data)
