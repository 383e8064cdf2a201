"""SASL: PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512; SaslHandshake (17) and SaslAuthenticate (36).

A connection on a SASL_PLAINTEXT or SASL_SSL listener must authenticate before any API
but ApiVersions and SASL (the server asks ``requires_authentication``). The mechanisms
offered are Kafka's ``sasl.enabled.mechanisms`` (default ``PLAIN``). PLAIN users come from
broker config: ``sasl.users=alice:secret,bob:pw`` or ``sasl.users.file=/path/users.json``
(``{"alice": "secret"}``). SCRAM users are the credentials stored in the broker's metadata
log (``streams.broker.security.credentials``), managed with AlterUserScramCredentials
(``kafka-configs --alter --add-config 'SCRAM-SHA-256=[password=...]' --entity-type users``).
Only the v1 flow is served (the tokens travel inside SaslAuthenticate), which is what
librdkafka, kafka-python and the Java client use.

As Kafka does, a connection whose handshake names a mechanism not offered, or whose
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
from streams.broker.security.scram import MECHANISMS, ScramAuthenticationError, ScramServer

logger = logging.getLogger(__name__)

PLAIN = "PLAIN"
SUPPORTED_MECHANISMS = (PLAIN, *MECHANISMS)
AUTHENTICATION_FAILED = "Authentication failed: Invalid username or password"
# Kafka's SaslServerAuthenticator answers a mechanism's own failure with these words
SCRAM_FAILED = (
    "Authentication failed during authentication due to invalid credentials with SASL "
    "mechanism {mechanism}"
)
CLOSE_AFTER_FAILURE_MS = 100
_MECHANISM_KEY = "sasl.mechanism"
_SCRAM_KEY = "sasl.scram"


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


def enabled_mechanisms(raw: Mapping[str, str]) -> tuple[str, ...]:
    """Kafka's ``sasl.enabled.mechanisms``, in order; ``PLAIN`` when unset."""
    key = "sasl.enabled.mechanisms"
    text = raw.get(key, "").strip() or PLAIN
    names = tuple(dict.fromkeys(m.strip().upper() for m in text.split(",") if m.strip()))
    unknown = [m for m in names if m not in SUPPORTED_MECHANISMS]
    if unknown or not names:
        raise SaslConfigError(key, text, f"some of {', '.join(SUPPORTED_MECHANISMS)}")
    return names


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
    extension = ctx.broker.extension
    cls = response_class(17, ctx.api_version)
    if not ctx.connection.listener.sasl:
        return make(cls, error_code=ErrorCode.illegal_sasl_state, mechanisms=())
    offered: tuple[str, ...] = extension.sasl_mechanisms
    if request.mechanism not in offered:
        logger.info(
            "connection %s asked for SASL mechanism %s; offered: %s",
            ctx.connection.peer,
            request.mechanism,
            ", ".join(offered),
        )
        ctx.connection.close_after_ms = CLOSE_AFTER_FAILURE_MS
        return make(cls, error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=offered)
    ctx.connection.attributes[_MECHANISM_KEY] = request.mechanism
    if request.mechanism in MECHANISMS:
        ctx.connection.attributes[_SCRAM_KEY] = ScramServer(
            MECHANISMS[request.mechanism],
            lambda user: extension.scram.lookup(request.mechanism, user),
        )
    return make(cls, error_code=ErrorCode.none, mechanisms=offered)


_COMMON = {"throttle_time": timedelta(0), "session_lifetime": timedelta(0)}


def _failed(ctx: RequestContext, message: str) -> Any:
    ctx.connection.close_after_ms = CLOSE_AFTER_FAILURE_MS
    return make(
        response_class(36, ctx.api_version),
        error_code=ErrorCode.sasl_authentication_failed,
        error_message=message,  # Kafka's words, which clients show to the user
        auth_bytes=b"",
        **_COMMON,
    )


def _authenticated(ctx: RequestContext, user: str, answer: bytes) -> Any:
    conn = ctx.connection
    conn.authenticated = True
    conn.principal = f"User:{user}"
    conn.attributes.pop(_SCRAM_KEY, None)
    logger.info(
        "connection %s authenticated as %s (%s)", conn.peer, user, conn.attributes[_MECHANISM_KEY]
    )
    # Kafka answers success with an empty message, not a null one
    return make(
        response_class(36, ctx.api_version),
        error_code=ErrorCode.none,
        error_message="",
        auth_bytes=answer,
        **_COMMON,
    )


def _scram(ctx: RequestContext, server: ScramServer, token: bytes) -> Any:
    try:
        answer = server.evaluate(token)
    except ScramAuthenticationError as e:
        logger.warning(
            "connection %s: SASL/%s authentication failed: %s",
            ctx.connection.peer,
            server.mechanism.name,
            e.reason,
        )
        ctx.connection.attributes.pop(_SCRAM_KEY, None)
        return _failed(
            ctx, e.public_message or SCRAM_FAILED.format(mechanism=server.mechanism.name)
        )
    if server.complete:
        assert server.username is not None
        return _authenticated(ctx, server.username, answer)
    return make(
        response_class(36, ctx.api_version),
        error_code=ErrorCode.none,
        error_message="",
        auth_bytes=answer,
        **_COMMON,
    )


async def handle_authenticate(ctx: RequestContext, request: Any) -> Any:
    conn = ctx.connection
    mechanism = conn.attributes.get(_MECHANISM_KEY)
    if not conn.listener.sasl or mechanism is None or conn.authenticated:
        return make(
            response_class(36, ctx.api_version),
            error_code=ErrorCode.illegal_sasl_state,
            error_message="SaslAuthenticate before a SaslHandshake",
            auth_bytes=b"",
            **_COMMON,
        )
    token = bytes(request.auth_bytes)
    if mechanism != PLAIN:
        server = conn.attributes.get(_SCRAM_KEY)
        if server is None:  # the exchange failed already
            return _failed(ctx, SCRAM_FAILED.format(mechanism=mechanism))
        return _scram(ctx, server, token)
    user = check_plain(ctx.broker.extension.sasl_users, token)
    if user is None:
        logger.warning("connection %s: SASL/PLAIN authentication failed", conn.peer)
        return _failed(ctx, AUTHENTICATION_FAILED)
    return _authenticated(ctx, user, b"")


APIS = [
    (17, (0, 1), handle_handshake),
    (36, (0, 1), handle_authenticate),
]
