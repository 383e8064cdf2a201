"""DescribeConfigs (32) v1–v4, AlterConfigs (33) v0–v2 and IncrementalAlterConfigs (44) v0–v1.

AlterConfigs is the legacy, whole-set form: the configs it names become the
topic's overrides and every override it does not name returns to the default,
as in Kafka; IncrementalAlterConfigs changes only the keys it names.

Topic configs are the storage's `LogConfig` keys (retention.ms, retention.bytes,
segment.bytes, cleanup.policy, ...); a topic's overrides are persisted by the
storage. BrokerContext resources can be described (read-only), not altered.

A topic config's synonyms (asked for with `include_synonyms`, as `kafka-configs
--describe` does) are Kafka's: the topic's own override (DYNAMIC_TOPIC_CONFIG), the
broker-wide setting under Kafka's broker name when the broker was started with one
(STATIC_BROKER_CONFIG, e.g. `log.cleanup.policy`), then the built-in default under that
name (DEFAULT_CONFIG). Kafka lists no default for `retention.ms`, `segment.ms` and
`flush.ms`, whose broker defaults are given in hours or not at all; neither does this.
A non-overridden config's source is the first broker synonym's.

A broker config that holds a secret (`sasl.users`), or one this broker does not know and
so cannot type, is described as Kafka describes a password: value null (its synonyms'
too) and `is_sensitive` true (`streams.broker.config.is_sensitive`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from streams.broker.config import is_sensitive
from streams.broker.context import RequestContext
from streams.broker.errors import BrokerError
from streams.broker.handlers import catalog
from streams.broker.protocol import make, response_module
from streams.broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from streams.broker.storage import LogConfig

logger = logging.getLogger(__name__)

DESCRIBE_CONFIGS = 32
ALTER_CONFIGS = 33
INCREMENTAL_ALTER_CONFIGS = 44
TOPIC = 2
BROKER = 4
# DescribeConfigs config_source values
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
# Topic config -> (Kafka's broker-wide name, whether Kafka lists its built-in default).
_BROKER_SYNONYMS = {
    "segment.bytes": ("log.segment.bytes", True),
    "segment.ms": ("log.roll.ms", False),
    "retention.ms": ("log.retention.ms", False),
    "retention.bytes": ("log.retention.bytes", True),
    "cleanup.policy": ("log.cleanup.policy", True),
    "delete.retention.ms": ("log.cleaner.delete.retention.ms", True),
    "min.compaction.lag.ms": ("log.cleaner.min.compaction.lag.ms", True),
    "index.interval.bytes": ("log.index.interval.bytes", True),
    "flush.messages": ("log.flush.interval.messages", True),
    "flush.ms": ("log.flush.interval.ms", False),
    "max.message.bytes": ("message.max.bytes", True),
    "message.timestamp.type": ("log.message.timestamp.type", True),
    "compression.type": ("compression.type", True),
    "min.insync.replicas": ("min.insync.replicas", True),
    "durability": ("log.durability", True),
    "min.cleanable.dirty.ratio": ("log.cleaner.min.cleanable.ratio", True),
}
_BUILT_IN = LogConfig().to_kafka()
# IncrementalAlterConfigs operations
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


Synonym = tuple[str, str | None, int]  # (name, value, source); no value for a secret


def _topic_synonyms(ctx: RequestContext, key: str, value: str, overridden: bool) -> list[Synonym]:
    """Kafka's synonyms of topic config `key`, highest precedence first."""
    synonyms: list[Synonym] = [(key, value, DYNAMIC_TOPIC_CONFIG)] if overridden else []
    broker_name, lists_default = _BROKER_SYNONYMS.get(key, (key, True))
    raw = ctx.broker.config.raw
    configured = [k for k in (broker_name, key) if k in raw]
    if configured:
        synonyms.append((broker_name, raw[configured[0]], STATIC_BROKER_CONFIG))
    if lists_default:
        synonyms.append((broker_name, _BUILT_IN[key], DEFAULT_CONFIG))
    return synonyms


Entry = tuple[str, str | None, int, bool, bool, list[Synonym]]
"""(key, value, source, read_only, is_sensitive, synonyms) of one described config."""


def _entries(ctx: RequestContext, rtype: int, name: str) -> list[Entry]:
    """The described configs of a resource; raises BrokerError."""
    broker = ctx.broker
    if rtype == TOPIC:
        values, overrides = catalog.topic_configs(broker, name)
        out: list[Entry] = []
        for k, v in sorted(values.items()):
            synonyms = _topic_synonyms(ctx, k, v, k in overrides)
            source = synonyms[0][2] if synonyms else DEFAULT_CONFIG
            out.append((k, v, source, False, False, synonyms))
        return out
    if rtype == BROKER:
        if name not in ("", str(broker.config.node_id)):
            raise catalog.InvalidRequestError(f"unknown broker `{name}`")
        out = []
        for k, v in sorted(broker.config.raw.items()):
            secret = is_sensitive(k)
            value = None if secret else v
            out.append(
                (k, value, STATIC_BROKER_CONFIG, True, secret, [(k, value, STATIC_BROKER_CONFIG)])
            )
        return out
    raise catalog.InvalidRequestError(
        f"resource type `{rtype}` is not supported (topic=2, broker=4)"
    )


def _denied(
    ctx: RequestContext, rtype: int, name: str, operation: AclOperation
) -> tuple[ErrorCode, str] | None:
    """Kafka's check of a config resource: `operation` on the topic for a topic's configs,
    on the cluster for the broker's; the error and Kafka's message when it fails."""
    if rtype == TOPIC:
        if ctx.authorized(operation, ResourceType.TOPIC, name):
            return None
        return ErrorCode.topic_authorization_failed, "Topic authorization failed."
    if ctx.authorized(operation, ResourceType.CLUSTER, CLUSTER_NAME):
        return None
    return ErrorCode.cluster_authorization_failed, "Cluster authorization failed."


async def describe_configs(ctx: RequestContext, request: Any) -> Any:
    module = response_module(DESCRIBE_CONFIGS, ctx.api_version)
    results = []
    for res in request.resources:
        keys = set(res.configuration_keys) if res.configuration_keys is not None else None
        error, message, configs = ErrorCode.none, None, []
        denied = _denied(
            ctx, int(res.resource_type), res.resource_name, AclOperation.DESCRIBE_CONFIGS
        )
        if denied is not None:
            results.append(
                make(
                    module.DescribeConfigsResult,
                    error_code=denied[0],
                    error_message=denied[1],
                    resource_type=res.resource_type,
                    resource_name=res.resource_name,
                    configs=(),
                )
            )
            continue
        try:
            for key, value, source, read_only, sensitive, synonyms in _entries(
                ctx, int(res.resource_type), res.resource_name
            ):
                if keys is not None and key not in keys:
                    continue
                configs.append(
                    make(
                        module.DescribeConfigsResourceResult,
                        name=key,
                        value=value,
                        read_only=read_only,
                        config_source=source,
                        is_sensitive=sensitive,
                        synonyms=tuple(
                            make(module.DescribeConfigsSynonym, name=n, value=v, source=src)
                            for n, v, src in synonyms
                        )
                        if request.include_synonyms
                        else (),
                        config_type=0,
                        documentation=None,
                    )
                )
        except BrokerError as e:
            error, message, configs = e.error_code, e.detail or str(e), []
        results.append(
            make(
                module.DescribeConfigsResult,
                error_code=error,
                error_message=message,
                resource_type=res.resource_type,
                resource_name=res.resource_name,
                configs=tuple(configs),
            )
        )
    return make(module.DescribeConfigsResponse, throttle_time=timedelta(0), results=tuple(results))


def _changes(current: dict[str, str], ops: Any) -> dict[str, str | None]:
    changes: dict[str, str | None] = {}
    for op in ops:
        kind = int(op.config_operation)
        if kind == SET:
            changes[op.name] = op.value
        elif kind == DELETE:
            changes[op.name] = None
        elif kind in (APPEND, SUBTRACT):
            items = [x for x in current.get(op.name, "").split(",") if x]
            value = [x for x in (op.value or "").split(",") if x]
            if kind == APPEND:
                items += [x for x in value if x not in items]
            else:
                items = [x for x in items if x not in value]
            changes[op.name] = ",".join(items)
        else:
            raise catalog.InvalidRequestError(
                f"config operation `{kind}` for `{op.name}` is not one of SET(0), DELETE(1), "
                "APPEND(2), SUBTRACT(3)"
            )
    return changes


def _incremental(broker: Any, name: str, configs: Any) -> dict[str, str | None]:
    values, _ = catalog.topic_configs(broker, name)
    return _changes(values, configs)


def _replace(broker: Any, name: str, configs: Any) -> dict[str, str | None]:
    # Legacy AlterConfigs sets the whole set: every override it leaves out is reset.
    _, overrides = catalog.topic_configs(broker, name)
    changes: dict[str, str | None] = dict.fromkeys(overrides)
    changes.update({c.name: c.value for c in configs})
    return changes


def _alter_each(
    ctx: RequestContext,
    request: Any,
    module: Any,
    changes_of: Callable[[Any, str, Any], dict[str, str | None]],
    verb: str,
) -> tuple[Any, ...]:
    """One result per resource of an (Incremental)AlterConfigs request; a resource's
    error fails that resource only."""
    results = []
    for res in request.resources:
        error, message = ErrorCode.none, None
        name = res.resource_name
        denied = _denied(ctx, int(res.resource_type), name, AclOperation.ALTER_CONFIGS)
        try:
            if denied is not None:
                error, message = denied[0], None
            elif int(res.resource_type) != TOPIC:
                raise catalog.InvalidRequestError(
                    f"only topic configs can be altered, not resource type `{res.resource_type}`"
                )
            else:
                changes = changes_of(ctx.broker, name, res.configs)
                catalog.alter_topic_configs(
                    ctx.broker, name, changes, validate_only=bool(request.validate_only)
                )
                if not request.validate_only:
                    logger.info("%s configs of topic %s: %s", verb, name, changes)
        except BrokerError as e:
            error, message = e.error_code, e.detail or str(e)
        results.append(
            make(
                module.AlterConfigsResourceResponse,
                error_code=error,
                error_message=message,
                resource_type=res.resource_type,
                resource_name=name,
            )
        )
    return tuple(results)


async def incremental_alter_configs(ctx: RequestContext, request: Any) -> Any:
    module = response_module(INCREMENTAL_ALTER_CONFIGS, ctx.api_version)
    results = _alter_each(ctx, request, module, _incremental, "altered")
    return make(
        module.IncrementalAlterConfigsResponse, throttle_time=timedelta(0), responses=results
    )


async def alter_configs(ctx: RequestContext, request: Any) -> Any:
    module = response_module(ALTER_CONFIGS, ctx.api_version)
    results = _alter_each(ctx, request, module, _replace, "replaced")
    return make(module.AlterConfigsResponse, throttle_time=timedelta(0), responses=results)


APIS = [
    (DESCRIBE_CONFIGS, (1, 4), describe_configs),
    (ALTER_CONFIGS, (0, 2), alter_configs),
    (INCREMENTAL_ALTER_CONFIGS, (0, 1), incremental_alter_configs),
]
