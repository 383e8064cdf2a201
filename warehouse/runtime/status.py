"""`warehouse status`: what each table holds and how far behind its source it is.

Everything comes from the tables themselves (the Delta log and the commit info
the sink writes), the checkpoints, and, for Kafka-sourced tables, the broker's
end offsets and the position of a table's dead letters. A broker that is down only
removes the lag column and that position.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import streams.storage as storage
from warehouse.compile.plan import select_tables
from warehouse.spec.paths import QUARANTINE_SUFFIX, table_exists
from warehouse.spec.table import DEFAULT_CLUSTER

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

    from streams.cdc import Position, PositionReader
    from warehouse.spec.model import LoadedProject

logger = logging.getLogger(__name__)


def _offsets_int(offsets: Any) -> dict[str, dict[int, int]]:
    """`{"topic": {"0": 42}}` (JSON keys) → `{"topic": {0: 42}}`; anything else → {}."""
    out: dict[str, dict[int, int]] = {}
    if not isinstance(offsets, dict):
        return out
    for topic, parts in offsets.items():
        if isinstance(parts, dict):
            try:
                out[str(topic)] = {int(p): int(o) for p, o in parts.items()}
            except (TypeError, ValueError):
                continue
    return out


def kafka_lag(committed: Any, end: dict[str, dict[int, int]]) -> dict[str, Any]:
    """Records between the committed offsets and the log end, per topic and in total."""
    done = _offsets_int(committed)
    per_topic: dict[str, int] = {}
    for topic, parts in end.items():
        per_topic[topic] = sum(
            max(0, off - done.get(topic, {}).get(p, 0)) for p, off in parts.items()
        )
    return {"total": sum(per_topic.values()), "topics": per_topic}


def table_status(
    project: LoadedProject,
    name: str,
    *,
    bootstrap: str | None,
    quality: dict[str, dict[str, Any]] | None = None,
    readers: ClusterReaders | None = None,
) -> dict[str, Any]:
    """One table's status row (see `status`); `quality`: the summaries of the quality
    events by table (read here for this table when not given); `readers`: as `status`."""
    from streams.delta import table_info

    defn = project.tables[name]
    path = project.table_path(name)
    qpath = project.quarantine_path(name)
    ckpt = project.checkpoint_path(name)
    row: dict[str, Any] = {
        "table": name,
        "layer": defn.layer,
        "path": path,
        "name": project.catalog_name(name),
        "quarantine_name": project.quarantine_catalog_name(name),
        "exists": table_exists(path),
        "version": None,
        "rows": None,
        "last_batch": None,
        "last_commit": None,
        "committed_offsets": None,
        "lag": None,
        "quarantine_rows": 0,
        "checkpoint": ckpt,
        "checkpoint_exists": storage.is_dir(ckpt),
    }
    if row["exists"]:
        info = table_info(path)
        last = info.get("last_commit") or {}
        row.update(
            version=info.get("version"),
            rows=info.get("rows"),
            last_batch=last.get("batch_id"),
            last_commit=last.get("timestamp"),
            committed_offsets=last.get("offsets"),
        )
        if row["committed_offsets"] is None:
            from streams.delta import recorded_offsets

            row["committed_offsets"] = recorded_offsets(path, name)
    if table_exists(qpath):
        row["quarantine_rows"] = table_info(qpath).get("rows")
    if defn.spec.expectations:
        if quality is None:
            from warehouse.quality.summary import quality_summaries

            quality = quality_summaries(project.root, [name])
        row["quality"] = quality[name]
    topics = defn.spec.source.topics
    if topics and len(defn.source_clusters) > 1:
        row["lag"] = _federated_lag(
            project, defn.source_clusters, topics, row, bootstrap, readers=readers
        )
    elif topics:
        cluster = defn.source_cluster or DEFAULT_CLUSTER
        servers = project.config.kafka.bootstrap_of(cluster, bootstrap)
        row["lag"] = _lag(
            project, topics, row["committed_offsets"], servers, cluster=cluster, readers=readers
        )
    if defn.spec.quarantine is not None:
        cluster = defn.dead_letter_cluster or DEFAULT_CLUSTER
        row["dead_letters"] = dead_letters_status(
            project,
            name,
            defn.spec.quarantine.kafka.topic,
            project.config.kafka.bootstrap_of(cluster, bootstrap),
            cluster=cluster,
            readers=readers,
        )
    upstream = [t for t in defn.spec.source.upstream_tables if t in project.tables]
    if upstream:
        row["versions_behind"] = versions_behind(project, upstream, ckpt)
    return row


def _federated_lag(
    project: LoadedProject,
    clusters: list[str],
    topics: list[str],
    row: dict[str, Any],
    bootstrap: str | None,
    *,
    readers: ClusterReaders | None = None,
) -> dict[str, Any] | None:
    """A federated table's lag per cluster, from the offsets its commits record by
    cluster, and in total: None for a cluster no broker answers for, and in total then;
    None when none answers."""
    from warehouse.compile.federation import of_cluster

    per: dict[str, Any] = {}
    for cluster in clusters:
        servers = project.config.kafka.bootstrap_of(cluster, bootstrap)
        done = of_cluster(row["committed_offsets"], cluster)
        per[cluster] = _lag(project, topics, done, servers, cluster=cluster, readers=readers)
    answered = [lag["total"] for lag in per.values() if lag is not None]
    if not answered:
        return None
    return {"total": sum(answered) if len(answered) == len(per) else None, "clusters": per}


def versions_behind(
    project: LoadedProject, upstream: list[str], checkpoint: str
) -> dict[str, Any] | None:
    """How far a table read from tables is behind them: per input table, its versions the
    query at `checkpoint` has not read yet (all of them before its first batch), and their
    total; None while no input table exists."""
    from streams.delta import delta_source_position, latest_version, table_id

    behind: dict[str, int] = {}
    for name in upstream:
        path = project.table_path(name)
        newest = latest_version(path)
        if newest is None:
            continue
        position = delta_source_position(checkpoint, table_id(path))
        behind[name] = max(0, newest + 1 - (position or 0))
    return {"total": sum(behind.values()), "tables": behind} if behind else None


def dead_letters_status(
    project: LoadedProject,
    name: str,
    topic: str,
    bootstrap: str | None,
    *,
    cluster: str = DEFAULT_CLUSTER,
    readers: ClusterReaders | None = None,
) -> dict[str, Any]:
    """How far table `name`'s dead letters are sent to `topic` (at `bootstrap`, of
    `cluster`): the quarantine table's
    newest version (None before its first), the newest whose dead letters are all in the
    topic (`sent_version`, None before any), and the versions not sent yet
    (`versions_behind`); the last two None when no broker answers. The position is read
    with `readers`' consumer of the cluster, else with a consumer of its own."""
    from streams.delta import latest_version, table_id

    qpath = project.quarantine_path(name)
    newest = latest_version(qpath)
    row: dict[str, Any] = {
        "topic": topic,
        "quarantine_version": newest,
        "sent_version": None,
        "versions_behind": None,
    }
    if bootstrap is None or not reachable(bootstrap):
        return row
    from streams.cdc import published_position

    conf = project.config.kafka.client_config({"socket.timeout.ms": "5000"}, cluster=cluster)
    table = name + QUARANTINE_SUFFIX
    try:
        if readers is None:
            at = published_position(bootstrap, topic, table, client_config=conf)
        else:
            at = readers.position(cluster, bootstrap, topic, table, client_config=conf)
    except Exception as e:  # noqa: BLE001  # broker down: no position, no error
        logger.info("dead letters of %s: position unavailable: %s", name, e)
        return row
    first_unsent = 0
    # A position of another table id is an earlier quarantine table's (a reset table).
    if at is not None and newest is not None and at.table_id == table_id(qpath):
        first_unsent = at.version
    row["sent_version"] = first_unsent - 1 if first_unsent > 0 else None
    row["versions_behind"] = 0 if newest is None else max(0, newest + 1 - first_unsent)
    return row


class ClusterReaders:
    """The Kafka clients `status` asks with, kept per cluster until `close`: for a caller
    of `status` every few seconds (the pipeline page), which would otherwise open and
    close a client per table each time. Per cluster, opened when first asked: a
    `streams.cdc.PositionReader` (read_committed) for where dead letters stand, and an
    admin client for the end offsets of a Kafka-sourced table's lag. A client whose call
    fails is closed, and a new one is opened on the next ask (the broker may have
    restarted elsewhere); so is one whose cluster's bootstrap changed.

    Concurrency: one lock; calls from several threads take turns. `close` closes every
    client; a later call opens them again."""

    def __init__(self) -> None:
        self._readers: dict[str, PositionReader] = {}
        self._admins: dict[str, tuple[str, AdminClient]] = {}
        self._lock = threading.Lock()

    def end_offsets(
        self,
        cluster: str,
        bootstrap: str,
        topics: list[str],
        *,
        client_config: Mapping[str, Any] | None = None,
    ) -> dict[str, dict[int, int]]:
        """The log end offset of every partition of `topics` on `cluster`."""
        from streams.kafka.admin import admin_client, end_offsets

        with self._lock:
            kept = self._admins.get(cluster)
            if kept is None or kept[0] != bootstrap:
                kept = (bootstrap, admin_client(bootstrap, client_config))
                self._admins[cluster] = kept
                logger.info("admin client of cluster %s opened at %s", cluster, bootstrap)
            try:
                return end_offsets(bootstrap, topics, admin=kept[1])
            except Exception:
                # Dropped: librdkafka closes its connections when the client is freed.
                del self._admins[cluster]
                raise

    def position(
        self,
        cluster: str,
        bootstrap: str,
        topic: str,
        table: str,
        *,
        client_config: Mapping[str, Any] | None = None,
    ) -> Position | None:
        """The position record of `table` publishing to `topic` on `cluster`."""
        from streams.cdc import PositionReader

        with self._lock:
            reader = self._readers.get(cluster)
            if reader is not None and reader.bootstrap != bootstrap:
                self._drop(cluster)
                reader = None
            if reader is None:
                reader = PositionReader(bootstrap, client_config=client_config)
                self._readers[cluster] = reader
                logger.info("position reader of cluster %s opened at %s", cluster, bootstrap)
            try:
                return reader.position(topic, table)
            except Exception:
                self._drop(cluster)
                raise

    def _drop(self, cluster: str) -> None:
        reader = self._readers.pop(cluster)
        reader.close()
        logger.info("position reader of cluster %s at %s closed", cluster, reader.bootstrap)

    def close(self) -> None:
        with self._lock:
            for cluster in list(self._readers):
                self._drop(cluster)
            self._admins.clear()


def reachable(bootstrap: str, *, timeout: float = 2.0) -> bool:
    """Whether any bootstrap server accepts a TCP connection (cheap; librdkafka would
    retry and log for its whole timeout against a broker that is down)."""
    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        host = host.strip("[]") or "127.0.0.1"
        try:
            with socket.create_connection((host, int(port)), timeout=timeout):
                return True
        except (OSError, ValueError):
            continue
    return False


def _lag(
    project: LoadedProject,
    topics: list[str],
    committed: Any,
    bootstrap: str | None,
    *,
    cluster: str,
    readers: ClusterReaders | None = None,
) -> Any:
    if bootstrap is None or not reachable(bootstrap):
        return None
    from streams.kafka import KafkaStreamError, end_offsets

    conf = project.config.kafka.client_config({"socket.timeout.ms": "5000"}, cluster=cluster)
    try:
        if readers is None:
            end = end_offsets(bootstrap, topics, client_config=conf)
        else:
            end = readers.end_offsets(cluster, bootstrap, topics, client_config=conf)
    except (KafkaStreamError, Exception) as e:  # noqa: BLE001  # broker down: no lag, no error
        logger.info("lag of %s unavailable: %s", ",".join(topics), e)
        return None
    return kafka_lag(committed, end)


def status(
    project: LoadedProject,
    *,
    layer: str | None = None,
    tables: list[str] | None = None,
    bootstrap: str | None = None,
    resolve: bool = True,
    readers: ClusterReaders | None = None,
) -> list[dict[str, Any]]:
    """Per table: path, Delta version, rows, last batch, committed offsets, lag (Kafka
    records; `versions_behind` its input tables for a table read from tables), quarantine.

    `bootstrap`: the default cluster's; with `resolve`, an `embedded` one is looked up
    from the running broker (never started); lag is None when no broker answers. A table
    on a named cluster is asked there.

    `readers`: the Kafka clients asking for lag and for where dead letters are sent, kept
    by a caller that asks again and again; without, each table's are opened and closed
    for it.
    """
    names = select_tables(project, layer=layer, tables=tables)
    if (
        bootstrap is None
        and resolve
        and any(DEFAULT_CLUSTER in project.tables[n].kafka_clusters for n in names)
    ):
        from warehouse.runtime.bootstrap import resolve_bootstrap

        try:
            bootstrap = resolve_bootstrap(project, start=False)
        except Exception as e:  # noqa: BLE001  # a broken pid file must not break status
            logger.info("broker status unavailable: %s", e)
            bootstrap = None
    checked = [n for n in names if project.tables[n].spec.expectations]
    quality = None
    if checked:
        from warehouse.quality.summary import quality_summaries

        quality = quality_summaries(project.root, checked)  # one read for every table
    return [
        table_status(project, n, bootstrap=bootstrap, quality=quality, readers=readers)
        for n in names
    ]


def render_status(rows: list[dict[str, Any]]) -> str:
    header = ("table", "layer", "version", "rows", "last batch", "lag", "quarantine")
    body = []
    for r in rows:
        lag = r["lag"]["total"] if isinstance(r.get("lag"), dict) else None
        lag = "-" if lag is None else lag
        body.append(
            (
                r["table"],
                r["layer"],
                "-" if r["version"] is None else str(r["version"]),
                "-" if r["rows"] is None else str(r["rows"]),
                "-" if r["last_batch"] is None else str(r["last_batch"]),
                str(lag),
                str(r["quarantine_rows"] or 0) if r["exists"] else "-",
            )
        )
    widths = [
        max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(header)
    ]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(b, widths, strict=True)) for b in body]
    for r in rows:
        if r["exists"]:
            named = f" ({r['name']})" if r.get("name") else ""
            lines.append(f"{r['table']}: {r['path']}{named}")
    lines += [_dead_letters_line(r) for r in rows if r.get("dead_letters")]
    lines += _quality_lines(rows)
    return "\n".join(lines)


def _dead_letters_line(row: dict[str, Any]) -> str:
    d = row["dead_letters"]
    return f"{row['table']}: dead letters to {d['topic']}: {dead_letters_text(d)}"


def dead_letters_text(d: dict[str, Any]) -> str:
    """How far a table's `dead_letters` (of its status row) are sent, in words."""
    newest, sent, behind = d["quarantine_version"], d["sent_version"], d["versions_behind"]
    if newest is None:
        return "none yet (no quarantine table)"
    if behind is None:
        return f"quarantine version {newest}, sent version unknown (no broker answered)"
    done = "none sent" if sent is None else f"sent through version {sent}"
    return f"{done} of quarantine version {newest} ({versions_behind_text(behind)})"


def versions_behind_text(behind: int) -> str:
    return "up to date" if behind == 0 else f"{behind} version{'' if behind == 1 else 's'} behind"


def _quality_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One line per expectation of each table's last checked batch, with totals."""
    out: list[str] = []
    for r in rows:
        last = (r.get("quality") or {}).get("last_batch")
        if not last:
            continue
        totals = r["quality"]["totals"]
        for e in last["expectations"]:
            total = totals.get(e["expectation"], {})
            out.append(
                f"{r['table']}: quality {e['expectation']} ({e['on_violation']}): "
                f"last batch {last['batch_id']} {e['failed']} failed of {e['checked']}; "
                f"all batches {total.get('failed', 0)} failed of {total.get('checked', 0)}"
            )
    return out
