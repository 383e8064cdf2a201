"""CreateTopics (19) v2–v7, DeleteTopics (20) v1–v6, CreatePartitions (37) v0–v3.

Manual replica assignments are accepted when they name this node only, and
refused as Kafka refuses them otherwise (see `assignments`).
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from streams.broker.context import RequestContext
from streams.broker.errors import BrokerError
from streams.broker.handlers import assignments, catalog
from streams.broker.protocol import make, response_module
from streams.broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType

logger = logging.getLogger(__name__)

CREATE_TOPICS = 19
DELETE_TOPICS = 20
CREATE_PARTITIONS = 37


def _create_one(
    ctx: RequestContext, topic: Any, validate_only: bool
) -> tuple[ErrorCode, str | None, int, dict[str, str]]:
    broker = ctx.broker
    name = topic.name
    partitions = int(topic.num_partitions)
    if partitions == -1:
        partitions = broker.config.num_partitions
    configs = {c.name: c.value for c in topic.configs if c.value is not None}
    if not (
        ctx.authorized(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False)
        or ctx.authorized(AclOperation.CREATE, ResourceType.TOPIC, name)
    ):
        return ErrorCode.topic_authorization_failed, "Authorization failed.", -1, {}
    try:
        catalog.validate_topic_name(name)
        if catalog.partition_count(broker, name) is not None:
            return ErrorCode.topic_already_exists, f"Topic `{name}` already exists.", -1, {}
        if topic.assignments:
            partitions = assignments.check_new_topic(topic, broker.config.node_id)
        limit = broker.config.max_partitions_per_topic
        if not 1 <= partitions <= limit:
            return (
                ErrorCode.invalid_partitions,
                f"Topic `{name}`: num_partitions `{partitions}` must be between 1 and {limit} "
                "(broker config max.partitions.per.topic).",
                -1,
                {},
            )
        if not topic.assignments and int(topic.replication_factor) not in (-1, 1):
            return (
                ErrorCode.invalid_replication_factor,
                f"Topic `{name}`: replication factor `{topic.replication_factor}` is not "
                "possible on this single-node broker; use 1 (or -1 for the default).",
                -1,
                {},
            )
        effective = catalog.validate_topic_configs(broker, configs)
        if not validate_only:
            catalog.create_topic(broker, name, partitions, configs)
            logger.info(
                "created topic %s with %d partition(s), configs %s", name, partitions, configs
            )
    except BrokerError as e:
        return e.error_code, e.detail or str(e), -1, {}
    except assignments.AssignmentError as e:
        return e.error, e.message, -1, {}
    return ErrorCode.none, None, partitions, effective


async def create_topics(ctx: RequestContext, request: Any) -> Any:
    module = response_module(CREATE_TOPICS, ctx.api_version)
    results = []
    for topic in request.topics:
        error, message, partitions, effective = _create_one(ctx, topic, bool(request.validate_only))
        configs = None
        # the configs go back only to a principal who may describe them (Kafka's rule)
        described = error is not ErrorCode.none or ctx.authorized(
            AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, topic.name, log_denied=False
        )
        if error is ErrorCode.none and described and hasattr(module, "CreatableTopicConfigs"):
            configs = tuple(
                module.CreatableTopicConfigs(
                    name=k, value=v, read_only=False, config_source=5, is_sensitive=False
                )
                for k, v in sorted(effective.items())
            )
        results.append(
            make(
                module.CreatableTopicResult,
                name=topic.name,
                topic_id=(
                    catalog.topic_id(ctx.broker, topic.name)
                    if error is ErrorCode.none
                    else catalog.ZERO_UUID
                ),
                error_code=error,
                error_message=message,
                topic_config_error_code=(
                    0 if described else int(ErrorCode.topic_authorization_failed.value)
                ),
                num_partitions=partitions,
                replication_factor=1 if error is ErrorCode.none else -1,
                configs=configs,
            )
        )
    return make(module.CreateTopicsResponse, throttle_time=timedelta(0), topics=tuple(results))


def _delete_one(ctx: RequestContext, name: str | None) -> tuple[ErrorCode, str | None]:
    if name is None:
        return ErrorCode.unknown_topic_id, "Deleting topics by id is not supported; use the name."
    if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, name, log_denied=False):
        return ErrorCode.topic_authorization_failed, None  # whether it exists or not
    try:
        if catalog.partition_count(ctx.broker, name) is None:
            return ErrorCode.unknown_topic_or_partition, f"Topic `{name}` does not exist."
        if not ctx.authorized(AclOperation.DELETE, ResourceType.TOPIC, name):
            return ErrorCode.topic_authorization_failed, None
        if catalog.is_internal(ctx.broker, name):
            return ErrorCode.invalid_request, f"Internal topic `{name}` cannot be deleted."
        ctx.broker.logs.delete_topic(name)
    except catalog.STORAGE_ERRORS as e:
        return catalog.storage_error_code(e), catalog.storage_error_message(e)
    logger.info("deleted topic %s", name)
    return ErrorCode.none, None


async def delete_topics(ctx: RequestContext, request: Any) -> Any:
    module = response_module(DELETE_TOPICS, ctx.api_version)
    if hasattr(request, "topics"):
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    results = []
    for name, tid in wanted:
        if name is None and tid is not None:
            name = catalog.topic_by_id(ctx.broker, tid)
        result_id = catalog.topic_id(ctx.broker, name) if name else (tid or catalog.ZERO_UUID)
        error, message = _delete_one(ctx, name)
        results.append(
            make(
                module.DeletableTopicResult,
                name=name,
                topic_id=result_id,
                error_code=error,
                error_message=message,
            )
        )
    return make(module.DeleteTopicsResponse, throttle_time=timedelta(0), responses=tuple(results))


def _add_partitions(
    ctx: RequestContext, topic: Any, validate_only: bool
) -> tuple[ErrorCode, str | None]:
    name, total = topic.name, int(topic.count)
    if not ctx.authorized(AclOperation.ALTER, ResourceType.TOPIC, name):
        return ErrorCode.topic_authorization_failed, None
    current = catalog.partition_count(ctx.broker, name)
    if current is None:
        return ErrorCode.unknown_topic_or_partition, f"Topic `{name}` does not exist."
    if total <= current:
        return (
            ErrorCode.invalid_partitions,
            f"Topic `{name}` has {current} partitions; the new count `{total}` must be larger.",
        )
    limit = ctx.broker.config.max_partitions_per_topic
    if total > limit:
        return (
            ErrorCode.invalid_partitions,
            f"Topic `{name}`: `{total}` partitions exceed max.partitions.per.topic ({limit}).",
        )
    if topic.assignments is not None:
        try:
            assignments.check_new_partitions(topic, current, ctx.broker.config.node_id)
        except assignments.AssignmentError as e:
            return e.error, e.message
    if validate_only:
        return ErrorCode.none, None
    try:
        ctx.broker.logs.add_partitions(name, total)
    except catalog.STORAGE_ERRORS as e:
        return catalog.storage_error_code(e), catalog.storage_error_message(e)
    logger.info("topic %s now has %d partitions (was %d)", name, total, current)
    return ErrorCode.none, None


async def create_partitions(ctx: RequestContext, request: Any) -> Any:
    module = response_module(CREATE_PARTITIONS, ctx.api_version)
    results = []
    for topic in request.topics:
        error, message = _add_partitions(ctx, topic, bool(request.validate_only))
        results.append(
            make(
                module.CreatePartitionsTopicResult,
                name=topic.name,
                error_code=error,
                error_message=message,
            )
        )
    return make(module.CreatePartitionsResponse, throttle_time=timedelta(0), results=tuple(results))


APIS = [
    (CREATE_TOPICS, (2, 7), create_topics),
    (DELETE_TOPICS, (1, 6), delete_topics),
    (CREATE_PARTITIONS, (0, 3), create_partitions),
]
