"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's ScramSaslServer speaks them.

A credential is what Kafka keeps of a password: the salt, the iteration count, and the
StoredKey and ServerKey derived from the salted password. The password itself, and the
salted password a client sends in AlterUserScramCredentials, are never kept.

`ScramServer` is one connection's exchange: `evaluate(client_first)` answers the
server-first message, `evaluate(client_final)` checks the client's proof and answers the
server-final message. A failure raises `ScramAuthenticationError`; its `public_message` is
what the client is told (Kafka's words), its `reason` only goes to the broker's log.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = [
    "MAX_ITERATIONS",
    "MECHANISMS",
    "ScramAuthenticationError",
    "ScramCredential",
    "ScramMechanism",
    "ScramServer",
    "credential_from_password",
    "credential_from_salted_password",
    "mechanism_by_type",
    "salted_password",
]


@dataclass(frozen=True)
class ScramMechanism:
    """A SCRAM mechanism: its SASL name, Kafka's type byte, the hash, the least iterations."""

    name: str
    type: int
    hash_name: str
    min_iterations: int = 4096

    def hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self.hash_name).digest()

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()


MECHANISMS: dict[str, ScramMechanism] = {
    "SCRAM-SHA-256": ScramMechanism("SCRAM-SHA-256", 1, "sha256"),
    "SCRAM-SHA-512": ScramMechanism("SCRAM-SHA-512", 2, "sha512"),
}
MAX_ITERATIONS = 16384
"""Kafka's upper bound of a credential's iteration count (ScramControlManager)."""


def mechanism_by_type(type_: int) -> ScramMechanism | None:
    """The mechanism of Kafka's type byte (1: SCRAM-SHA-256, 2: SCRAM-SHA-512), else None."""
    return next((m for m in MECHANISMS.values() if m.type == type_), None)


@dataclass(frozen=True)
class ScramCredential:
    """What is kept of a user's password for one mechanism; never the password."""

    salt: bytes = field(repr=False)
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int


def salted_password(
    mechanism: ScramMechanism, password: str, salt: bytes, iterations: int
) -> bytes:
    """RFC 5802's Hi(): PBKDF2 with the mechanism's HMAC."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), salt, iterations)


def credential_from_salted_password(
    mechanism: ScramMechanism, salt: bytes, salted: bytes, iterations: int
) -> ScramCredential:
    """The credential of a salted password, as Kafka's controller derives it from an
    AlterUserScramCredentials upsertion (StoredKey = H(ClientKey), ServerKey)."""
    client_key = mechanism.hmac(salted, b"Client Key")
    return ScramCredential(
        salt=salt,
        stored_key=mechanism.hash(client_key),
        server_key=mechanism.hmac(salted, b"Server Key"),
        iterations=iterations,
    )


def credential_from_password(
    mechanism: ScramMechanism, password: str, *, iterations: int = 4096, salt: bytes | None = None
) -> ScramCredential:
    salt = salt if salt is not None else secrets.token_bytes(16)
    salted = salted_password(mechanism, password, salt, iterations)
    return credential_from_salted_password(mechanism, salt, salted, iterations)


class ScramAuthenticationError(Exception):
    """The exchange failed. `public_message` is the client's answer, `reason` the log's."""

    def __init__(self, reason: str, *, public_message: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.public_message = public_message


# Kafka's ClientFirstMessage: a gs2 header without channel binding ("n"), an optional
# authorization id, then the user's SASL name, the nonce and optional extensions.
_CLIENT_FIRST = re.compile(
    r"n,(?:a=(?P<authzid>[^,]*))?,(?P<bare>n=(?P<saslname>[^,]+),r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+)"
    r"(?P<extensions>(?:,[a-zA-Z]+=[^,]*)*))\Z"
)
_CLIENT_FINAL = re.compile(
    r"(?P<without_proof>c=(?P<channel>[A-Za-z0-9+/=]+),r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+)"
    r"(?:,[a-zA-Z]+=[^,]*)*),p=(?P<proof>[A-Za-z0-9+/=]+)\Z"
)


def _username(saslname: str) -> str:
    """RFC 5802's saslname: `,` and `=` travel as `=2C` and `=3D`."""
    if re.search(r"=(?!2C|3D)", saslname):
        raise ScramAuthenticationError(f"invalid SCRAM username `{saslname}`")
    return saslname.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """One connection's SCRAM exchange (two client messages). Not thread-safe."""

    def __init__(
        self,
        mechanism: ScramMechanism,
        lookup: Callable[[str], ScramCredential | None],
        *,
        nonce: Callable[[], str] | None = None,
    ) -> None:
        self.mechanism = mechanism
        self._lookup = lookup
        self._nonce = nonce or (lambda: secrets.token_urlsafe(24))
        self._credential: ScramCredential | None = None
        self._auth_prefix = b""
        self._nonce_full = ""
        self.username: str | None = None
        self.complete = False

    def evaluate(self, token: bytes) -> bytes:
        """The answer to the client's next message; `ScramAuthenticationError` on failure."""
        try:
            text = token.decode()
        except UnicodeDecodeError:
            raise ScramAuthenticationError("a SCRAM message that is not UTF-8") from None
        if self._credential is None:
            return self._first(text)
        return self._final(text)

    def _first(self, text: str) -> bytes:
        match = _CLIENT_FIRST.match(text)
        if match is None:
            raise ScramAuthenticationError("invalid SCRAM client first message format")
        username = _username(match["saslname"])
        credential = self._lookup(username)
        if credential is None:
            raise ScramAuthenticationError(f"no {self.mechanism.name} credential for `{username}`")
        authzid = match["authzid"]
        if authzid and authzid != username:
            raise ScramAuthenticationError(
                f"`{username}` asked to act as `{authzid}`",
                public_message="Authentication failed: Client requested an authorization id "
                "that is different from username",
            )
        if credential.iterations < self.mechanism.min_iterations:
            raise ScramAuthenticationError(
                f"the credential of `{username}` has {credential.iterations} iterations, "
                f"fewer than {self.mechanism.min_iterations}"
            )
        self._nonce_full = match["nonce"] + self._nonce()
        salt = base64.b64encode(credential.salt).decode()
        server_first = f"r={self._nonce_full},s={salt},i={credential.iterations}"
        self._auth_prefix = f"{match['bare']},{server_first},".encode()
        self._credential = credential
        self.username = username
        return server_first.encode()

    def _final(self, text: str) -> bytes:
        credential = self._credential
        assert credential is not None
        self._credential = None  # one attempt per exchange
        match = _CLIENT_FINAL.match(text)
        if match is None:
            raise ScramAuthenticationError("invalid SCRAM client final message format")
        if match["nonce"] != self._nonce_full:
            raise ScramAuthenticationError("invalid client nonce in the final client message")
        auth_message = self._auth_prefix + match["without_proof"].encode()
        proof = base64.b64decode(match["proof"])
        signature = self.mechanism.hmac(credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise ScramAuthenticationError("a client proof of the wrong length")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(self.mechanism.hash(client_key), credential.stored_key):
            raise ScramAuthenticationError(f"invalid client proof for `{self.username}`")
        server_signature = self.mechanism.hmac(credential.server_key, auth_message)
        self.complete = True
        return b"v=" + base64.b64encode(server_signature)
