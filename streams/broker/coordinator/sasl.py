"""SASL/PLAIN users and the SaslHandshake (17) / SaslAuthenticate (36) handlers.

Users come from broker config: ``sasl.users=alice:secret,bob:pw`` or
``sasl.users.file=/path/users.json`` (``{"alice": "secret"}``); with either set,
every connection must authenticate before any API but ApiVersions and SASL
(the server asks ``Coordinator.requires_authentication``). Only PLAIN is
offered, and only the v1 flow (the token travels inside SaslAuthenticate),
which is what librdkafka, kafka-python and the Java client use.

As Kafka does, a connection whose handshake names another mechanism, or whose
authentication fails, gets its answer (UNSUPPORTED_SASL_MECHANISM with the mechanisms
offered, or SASL_AUTHENTICATION_FAILED with Kafka's message) and is closed
``CLOSE_AFTER_FAILURE_MS`` later (Kafka's `connection.failed.authentication.delay.ms`
default), no further request read: a client reads the answer before the end of the
connection.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from streams.broker.config import ConfigError
from streams.broker.context import RequestContext
from streams.broker.protocol import make, response_class

logger = logging.getLogger(__name__)

MECHANISM = "PLAIN"
AUTHENTICATION_FAILED = "Authentication failed: Invalid username or password"
CLOSE_AFTER_FAILURE_MS = 100
_MECHANISM_KEY = "sasl.mechanism"


class SaslConfigError(ConfigError):
    """A ``sasl.*`` broker setting that cannot be used; ``key`` names it."""


def load_users(raw: Mapping[str, str]) -> dict[str, str]:
    """``{user: password}`` from ``sasl.users`` and/or ``sasl.users.file``; empty = SASL off."""
    users: dict[str, str] = {}
    spec = raw.get("sasl.users", "").strip()
    for item in filter(None, (s.strip() for s in spec.split(","))):
        user, sep, password = item.partition(":")
        if not sep or not user:
            raise SaslConfigError(
                "sasl.users",
                user or item,
                "comma-separated `user:password` entries, e.g. `alice:secret,bob:pw`",
            )
        users[user] = password
    path = raw.get("sasl.users.file", "").strip()
    if path:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as e:
            raise SaslConfigError(
                "sasl.users.file", path, f"a readable JSON file of users ({e})"
            ) from e
        if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
            raise SaslConfigError("sasl.users.file", path, 'a JSON object `{"user": "password"}`')
        users.update(data)
    return users


def check_plain(users: Mapping[str, str], token: bytes) -> str | None:
    """The authenticated user of a PLAIN token (``authzid NUL user NUL password``), else None."""
    parts = token.split(b"\0")
    if len(parts) != 3:
        return None
    authzid, user_b, password_b = parts
    try:
        user, password = user_b.decode(), password_b.decode()
    except UnicodeDecodeError:
        return None
    if authzid and authzid != user_b:
        return None  # acting for another principal is not supported
    expected = users.get(user)
    # compare even for unknown users so timing does not reveal which names exist
    ok = hmac.compare_digest((expected or "\0").encode(), password.encode())
    return user if ok and expected is not None else None


async def handle_handshake(ctx: RequestContext, request: Any) -> Any:
    users = ctx.broker.extension.sasl_users
    cls = response_class(17, ctx.api_version)
    if not users:
        return make(cls, error_code=ErrorCode.illegal_sasl_state, mechanisms=())
    if request.mechanism != MECHANISM:
        logger.info(
            "connection %s asked for SASL mechanism %s; only PLAIN",
            ctx.connection.peer,
            request.mechanism,
        )
        ctx.connection.close_after_ms = CLOSE_AFTER_FAILURE_MS
        return make(cls, error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=(MECHANISM,))
    ctx.connection.attributes[_MECHANISM_KEY] = MECHANISM
    return make(cls, error_code=ErrorCode.none, mechanisms=(MECHANISM,))


async def handle_authenticate(ctx: RequestContext, request: Any) -> Any:
    users = ctx.broker.extension.sasl_users
    cls = response_class(36, ctx.api_version)
    conn = ctx.connection
    common = {"throttle_time": timedelta(0), "auth_bytes": b"", "session_lifetime": timedelta(0)}
    if not users or conn.attributes.get(_MECHANISM_KEY) != MECHANISM:
        return make(
            cls,
            error_code=ErrorCode.illegal_sasl_state,
            error_message="SaslAuthenticate before a SaslHandshake for PLAIN",
            **common,
        )
    user = check_plain(users, bytes(request.auth_bytes))
    if user is None:
        logger.warning("connection %s: SASL/PLAIN authentication failed", conn.peer)
        conn.close_after_ms = CLOSE_AFTER_FAILURE_MS
        return make(
            cls,
            error_code=ErrorCode.sasl_authentication_failed,
            # Kafka's words, which clients show to the user
            error_message=AUTHENTICATION_FAILED,
            **common,
        )
    conn.authenticated = True
    conn.principal = user
    logger.info("connection %s authenticated as %s", conn.peer, user)
    # Kafka answers success with an empty message, not a null one
    return make(cls, error_code=ErrorCode.none, error_message="", **common)


APIS = [
    (17, (0, 1), handle_handshake),
    (36, (0, 1), handle_authenticate),
]
