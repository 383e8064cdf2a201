"""Where the Kafka of an environment is: a bootstrap string, or the embedded broker."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from warehouse.runtime.errors import QueryFailedError, RuntimeConfigError
from warehouse.spec.config import ENV_PREFIX
from warehouse.spec.table import DEFAULT_CLUSTER

if TYPE_CHECKING:
    from warehouse.spec.model import LoadedProject

REACH_TIMEOUT_S = 15.0
"""How long `check_reachable` waits for the cluster's metadata."""

logger = logging.getLogger(__name__)


def resolve_bootstrap(project: LoadedProject, *, start: bool = True) -> str | None:
    """The bootstrap servers to use.

    `embedded` starts the bundled broker on demand (or reuses the live one found
    through its pid file) when `start`; otherwise returns the running one's
    bootstrap, or None when it is not running.
    """
    kafka = project.config.kafka
    if not kafka.is_embedded:
        return kafka.bootstrap
    from streams.broker.launcher import BrokerAddressInUseError, broker_status, ensure_broker

    data_dir = project.broker_dir()
    emb = kafka.embedded
    if start:
        try:
            bootstrap = ensure_broker(
                data_dir, host=emb.host, port=emb.port, config=dict(emb.config)
            )
        except BrokerAddressInUseError as e:
            raise RuntimeConfigError(
                f"The project's embedded broker (data {data_dir}) cannot listen on "
                f"{e.host}:{e.port}: another process listens there, such as another "
                "project's embedded broker (`warehouse broker stop` in that project's folder "
                "stops it). Stop it, or give this project its own port: "
                "`kafka.embedded.port` in conf/<env>.yml (0: any free port)."
            ) from e
        logger.info("embedded broker at %s (data %s)", bootstrap, data_dir)
        return bootstrap
    status = broker_status(data_dir)
    if not status:
        return None
    return status.get("bootstrap") or f"{status.get('host', emb.host)}:{status['port']}"


def check_reachable(
    bootstrap: str,
    client_config: Mapping[str, str],
    *,
    table: str,
    layer: str | None = None,
    cluster: str = DEFAULT_CLUSTER,
    timeout: float = REACH_TIMEOUT_S,
) -> None:
    """Ask `bootstrap` (of `cluster`) for the cluster's metadata once, with the client
    settings `table` reads with, and raise `QueryFailedError` naming the table, the
    bootstrap and the settings to check when no answer comes within `timeout` seconds:
    Spark's Java client would otherwise take minutes of admin timeouts to fail the query."""
    from confluent_kafka import KafkaException

    try:
        admin = _admin(bootstrap, client_config)
    except KafkaException as e:
        # Settings only Spark's Java client knows (the native engine takes them): the
        # query itself will say whether the cluster answers.
        logger.info("table %s: Kafka at %s not checked: %s", table, bootstrap, e)
        return
    try:
        admin.list_topics(timeout=timeout)
    except KafkaException as e:
        reason = e.args[0].str() if e.args and hasattr(e.args[0], "str") else str(e)
        at = "kafka" if cluster == DEFAULT_CLUSTER else f"kafka.clusters.{cluster}"
        raise QueryFailedError(
            f"Table `{table}` reads Kafka at `{bootstrap}`, which did not answer within "
            f"{timeout:.0f}s ({reason}). Check that the broker runs and that "
            f"`{at}.bootstrap` in conf/<env>.yml (or `{ENV_PREFIX}{at.upper().replace('.', '__')}"
            f"__BOOTSTRAP`) names it, with the security settings it expects (`{at}.security`).",
            table=table,
            layer=layer,
        ) from e
    logger.debug("table %s: Kafka at %s answers", table, bootstrap)


def listed_topics(
    bootstrap: str, client_config: Mapping[str, str], *, timeout: float = REACH_TIMEOUT_S
) -> set[str] | None:
    """The names of the cluster's topics, or None when it cannot be asked with these
    settings (the query then says what it finds). Listing every topic creates none,
    whatever the broker's `auto.create.topics.enable`."""
    from confluent_kafka import KafkaException

    try:
        return set(_admin(bootstrap, client_config).list_topics(timeout=timeout).topics)
    except KafkaException as e:
        logger.info("Kafka at %s: topics not checked: %s", bootstrap, e)
        return None


def _admin(bootstrap: str, client_config: Mapping[str, str]) -> Any:
    """An admin client with the table's client settings; librdkafka logs every refused
    connection to stderr, so its log goes to logging instead."""
    from confluent_kafka.admin import AdminClient

    return AdminClient(
        {**client_config, "bootstrap.servers": bootstrap}, logger=logging.getLogger(__name__)
    )
