"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), v0.

What `kafka-configs --entity-type users --alter --add-config 'SCRAM-SHA-256=[...]'` and the
Admin API (`describe_user_scram_credentials`, `alter_user_scram_credentials`) send. A
client sends the salted password, never the password; the broker keeps only what SCRAM
needs to check a client (`streams.broker.security.credentials`). Describing answers the
mechanisms and iteration counts, never a salt or key.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from streams.broker.context import RequestContext
from streams.broker.protocol import make, response_module
from streams.broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from streams.broker.security.credentials import ScramDeletion, ScramUpsertion

DESCRIBE_USER_SCRAM_CREDENTIALS = 50
ALTER_USER_SCRAM_CREDENTIALS = 51
NOT_AUTHORIZED = "Cluster authorization failed."


async def describe_user_scram_credentials(ctx: RequestContext, request: Any) -> Any:
    module = response_module(DESCRIBE_USER_SCRAM_CREDENTIALS, ctx.api_version)
    if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return make(
            module.DescribeUserScramCredentialsResponse,
            throttle_time=timedelta(0),
            error_code=ErrorCode.cluster_authorization_failed,
            error_message=NOT_AUTHORIZED,
            results=(),
        )
    store = ctx.broker.extension.scram
    users = None if request.users is None else [u.name for u in request.users]
    results = tuple(
        make(
            module.DescribeUserScramCredentialsResult,
            user=user,
            error_code=code,
            error_message=message,
            credential_infos=tuple(
                make(module.CredentialInfo, mechanism=mechanism, iterations=iterations)
                for mechanism, iterations in infos
            ),
        )
        for user, code, message, infos in store.describe(users)
    )
    return make(
        module.DescribeUserScramCredentialsResponse,
        throttle_time=timedelta(0),
        error_code=ErrorCode.none,
        error_message="",  # Kafka answers an empty message, not a null one
        results=results,
    )


async def alter_user_scram_credentials(ctx: RequestContext, request: Any) -> Any:
    module = response_module(ALTER_USER_SCRAM_CREDENTIALS, ctx.api_version)
    coordinator = ctx.broker.extension
    if not ctx.authorized(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        users = dict.fromkeys(
            [d.name for d in request.deletions] + [u.name for u in request.upsertions]
        )
        refused = [(u, ErrorCode.cluster_authorization_failed, NOT_AUTHORIZED) for u in users]
        return make(
            module.AlterUserScramCredentialsResponse,
            throttle_time=timedelta(0),
            results=tuple(
                make(module.AlterUserScramCredentialsResult, user=u, error_code=c, error_message=m)
                for u, c, m in refused
            ),
        )
    results = coordinator.scram.alter(
        [ScramDeletion(d.name, int(d.mechanism)) for d in request.deletions],
        [
            ScramUpsertion(
                u.name, int(u.mechanism), int(u.iterations), bytes(u.salt), bytes(u.salted_password)
            )
            for u in request.upsertions
        ],
        now_ms=coordinator.now_ms(),
    )
    return make(
        module.AlterUserScramCredentialsResponse,
        throttle_time=timedelta(0),
        results=tuple(
            make(
                module.AlterUserScramCredentialsResult,
                user=user,
                error_code=code,
                error_message=message,
            )
            for user, code, message in results
        ),
    )


APIS = [
    (DESCRIBE_USER_SCRAM_CREDENTIALS, (0, 0), describe_user_scram_credentials),
    (ALTER_USER_SCRAM_CREDENTIALS, (0, 0), alter_user_scram_credentials),
]
