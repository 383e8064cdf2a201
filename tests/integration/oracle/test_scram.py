"""SASL/SCRAM on both brokers (`secure_brokers`: a SASL_PLAINTEXT listener offering PLAIN
and SCRAM-SHA-256/512): credentials managed with AlterUserScramCredentials and
DescribeUserScramCredentials (raw, through confluent-kafka's AdminClient and Kafka's
`kafka-configs`), and the SCRAM exchange on the wire and through confluent-kafka and the
Java client. The PLAIN user `alice` manages the credentials; each scenario makes its own
SCRAM users (`unique`), which the answers name as `<user>`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kio.schema.alter_user_scram_credentials.v0 import request as alter_req
from kio.schema.alter_user_scram_credentials.v0.response import AlterUserScramCredentialsResponse
from kio.schema.describe_user_scram_credentials.v0 import request as describe_req
from kio.schema.describe_user_scram_credentials.v0.response import (
    DescribeUserScramCredentialsResponse,
)
from kio.schema.sasl_authenticate.v1.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v1.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse
from kio.static.primitive import i8, i32

from tests.integration.oracle.differential import on_both, unique
from tests.support.apache_kafka import SASL_USERS
from tests.support.broker_wire import Wire
from tests.support.java_client import JavaClient
from tests.support.kafka_tools import run as kafka_tool

pytestmark = pytest.mark.kafka

ADMIN, ADMIN_PASSWORD = next(iter(SASL_USERS.items()))
PASSWORD = "scram-oracle-pw-41c8"
HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


def _plain_login(w: Wire) -> None:
    hs = w.call(SaslHandshakeRequest(mechanism="PLAIN"), SaslHandshakeResponse)
    assert hs.error_code.name == "none", hs
    token = f"\0{ADMIN}\0{ADMIN_PASSWORD}".encode()
    auth = w.call(SaslAuthenticateRequest(auth_bytes=token), SaslAuthenticateResponse)
    assert auth.error_code.name == "none", auth


def _upsertion(user: str, mechanism: int, iterations: int, password: str = PASSWORD) -> Any:
    salt = b"0123456789abcdef"
    name = "SCRAM-SHA-256" if mechanism == 1 else "SCRAM-SHA-512"
    salted = hashlib.pbkdf2_hmac(HASHES.get(name, "sha256"), password.encode(), salt, iterations)
    return alter_req.ScramCredentialUpsertion(
        name=user,
        mechanism=i8(mechanism),
        iterations=i32(iterations),
        salt=salt,
        salted_password=salted,
    )


def _alter(w: Wire, deletions: list[Any], upsertions: list[Any], names: dict[str, str]) -> Any:
    response = w.call(
        alter_req.AlterUserScramCredentialsRequest(
            deletions=tuple(deletions), upsertions=tuple(upsertions)
        ),
        AlterUserScramCredentialsResponse,
    )
    return sorted(
        (names.get(r.user, r.user), r.error_code.name, r.error_message) for r in response.results
    )


def _describe(w: Wire, users: list[str] | None, names: dict[str, str]) -> Any:
    request = describe_req.DescribeUserScramCredentialsRequest(
        users=None if users is None else tuple(describe_req.UserName(name=u) for u in users)
    )
    response = w.call(request, DescribeUserScramCredentialsResponse)
    results = [
        (
            names.get(r.user, r.user),
            r.error_code.name,
            None if r.error_message is None else r.error_message.replace(r.user, "<user>"),
            sorted((int(i.mechanism), int(i.iterations)) for i in r.credential_infos),
        )
        for r in response.results
        if users is not None or r.user in names
    ]
    return (response.error_code.name, response.error_message, sorted(results))


def _applied(w: Wire, expected: dict[str, list[tuple[int, int]]], timeout: float = 30) -> None:
    """Wait until the broker answers each user's credentials as `expected` (mechanism,
    iterations). Apache Kafka acknowledges an alteration once its controller has committed
    it, and a broker answers a describe from the metadata it has applied, which can be a
    moment behind; what the describe then says is the test's to compare."""
    deadline = time.monotonic() + timeout
    while True:
        _, _, results = _describe(w, list(expected), {})
        seen = {user: mechanisms for user, _, _, mechanisms in results}
        if seen == expected or time.monotonic() > deadline:
            return
        time.sleep(0.2)


def admin_api(bootstrap: str) -> dict[str, Any]:
    """AlterUserScramCredentials and DescribeUserScramCredentials, raw: what succeeds, what is
    refused and with which words."""
    a, b, c, d = (unique("scram-user") for _ in range(4))
    names = {a: "<a>", b: "<b>", c: "<c>", d: "<d>"}
    out: dict[str, Any] = {}
    with Wire(bootstrap) as w:
        _plain_login(w)
        out["create"] = _alter(w, [], [_upsertion(a, 1, 4096), _upsertion(b, 2, 8192)], names)
        out["refused"] = _alter(
            w,
            [alter_req.ScramCredentialDeletion(name=c, mechanism=i8(1))],
            [
                _upsertion(d, 1, 4095),
                _upsertion("", 1, 4096),
                _upsertion(a, 3, 4096),
                _upsertion(b, 1, 16385),
            ],
            names,
        )
        out["duplicate"] = _alter(w, [], [_upsertion(c, 1, 4096), _upsertion(c, 2, 4096)], names)
        out["second_mechanism"] = _alter(w, [], [_upsertion(a, 2, 10000)], names)
        _applied(w, {a: [(1, 4096), (2, 10000)], b: [(2, 8192)]})
        out["describe"] = _describe(w, [a, b, c], names)
        out["describe_twice"] = _describe(w, [a, a], names)
        out["describe_all"] = _describe(w, None, names)
        out["delete"] = _alter(
            w, [alter_req.ScramCredentialDeletion(name=a, mechanism=i8(1))], [], names
        )
        _applied(w, {a: [(2, 10000)]})
        out["after_delete"] = _describe(w, [a], names)
    return out


def test_admin_api(secure_brokers: dict[str, str]) -> None:
    on_bundled, on_kafka = on_both(secure_brokers, admin_api)
    assert on_kafka["create"] == [("<a>", "none", None), ("<b>", "none", None)]
    assert on_kafka["describe"][2][0] == ("<a>", "none", "", [(1, 4096), (2, 10000)])
    assert on_bundled == on_kafka


def _client_first(user: str, nonce: str) -> str:
    return f"n,,n={user},r={nonce}"


def _exchange(bootstrap: str, mechanism: str, user: str, password: str) -> dict[str, Any]:
    """A SCRAM exchange by hand: what each step answers (nonces and salts as their shape)."""
    seen: dict[str, Any] = {}
    with Wire(bootstrap) as w:
        hs = w.call(SaslHandshakeRequest(mechanism=mechanism), SaslHandshakeResponse)
        # Kafka lists the mechanisms in the order of a Java HashMap: clients take them as a set
        seen["handshake"] = (hs.error_code.name, sorted(hs.mechanisms))
        first = _client_first(user, "clientnonce123")
        auth = w.call(SaslAuthenticateRequest(auth_bytes=first.encode()), SaslAuthenticateResponse)
        seen["first"] = (auth.error_code.name, auth.error_message)
        if auth.error_code.name != "none":
            seen["closed"] = _closed(w)
            return seen
        server_first = auth.auth_bytes.decode()
        seen["server_first"] = re.sub(
            r"r=clientnonce123[^,]+,s=[^,]+,", "r=<nonce>,s=<salt>,", server_first
        )
        fields = dict(item.split("=", 1) for item in server_first.split(","))
        salt, iterations = base64.b64decode(fields["s"]), int(fields["i"])
        digest = HASHES[mechanism]
        salted = hashlib.pbkdf2_hmac(digest, password.encode(), salt, iterations)
        client_key = hmac.new(salted, b"Client Key", digest).digest()
        stored_key = hashlib.new(digest, client_key).digest()
        without_proof = f"c=biws,r={fields['r']}"
        auth_message = f"n={user},r=clientnonce123,{server_first},{without_proof}".encode()
        signature = hmac.new(stored_key, auth_message, digest).digest()
        proof = bytes(x ^ y for x, y in zip(client_key, signature, strict=True))
        final = f"{without_proof},p={base64.b64encode(proof).decode()}"
        auth = w.call(SaslAuthenticateRequest(auth_bytes=final.encode()), SaslAuthenticateResponse)
        seen["final"] = (auth.error_code.name, auth.error_message)
        if auth.error_code.name == "none":
            server_key = hmac.new(salted, b"Server Key", digest).digest()
            expected = hmac.new(server_key, auth_message, digest).digest()
            seen["server_signature_checks"] = auth.auth_bytes == b"v=" + base64.b64encode(expected)
            seen["session_lifetime"] = auth.session_lifetime == timedelta(0)
        seen["closed"] = _closed(w)
    return seen


def _closed(w: Wire) -> bool:
    w.sock.settimeout(2)
    try:
        return w.closed_by_peer()
    except TimeoutError:
        return False


def wire(bootstrap: str) -> dict[str, Any]:
    user = unique("scram-wire")
    with Wire(bootstrap) as w:
        _plain_login(w)
        assert _alter(w, [], [_upsertion(user, 1, 4096)], {}) == [(user, "none", None)]
        _applied(w, {user: [(1, 4096)]})
    out = {
        "right": _exchange(bootstrap, "SCRAM-SHA-256", user, PASSWORD),
        "wrong_password": _exchange(bootstrap, "SCRAM-SHA-256", user, "nope"),
        "other_mechanism": _exchange(bootstrap, "SCRAM-SHA-512", user, PASSWORD),
        "unknown_user": _exchange(bootstrap, "SCRAM-SHA-256", user + "-nobody", PASSWORD),
    }
    with Wire(bootstrap) as w:
        w.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), SaslHandshakeResponse)
        bad = w.call(SaslAuthenticateRequest(auth_bytes=b"garbage"), SaslAuthenticateResponse)
        out["malformed"] = (bad.error_code.name, bad.error_message, _closed(w))
    with Wire(bootstrap) as w:
        w.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), SaslHandshakeResponse)
        token = f"n,a=someone-else,n={user},r=abc".encode()
        other = w.call(SaslAuthenticateRequest(auth_bytes=token), SaslAuthenticateResponse)
        out["authzid"] = (other.error_code.name, other.error_message, _closed(w))
    return out


def test_wire(secure_brokers: dict[str, str]) -> None:
    on_bundled, on_kafka = on_both(secure_brokers, wire)
    assert on_kafka["right"]["final"][0] == "none"
    assert on_kafka["right"]["server_signature_checks"] is True
    assert on_kafka["wrong_password"]["final"][0] == "sasl_authentication_failed"
    assert on_bundled == on_kafka


def _conf(mechanism: str, user: str, password: str) -> dict[str, Any]:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
        "log_level": 0,
    }


_TIMING = re.compile(r" \(after \d+ms in state \w+(?:, \d+ identical error\(s\) suppressed)?\)")
_ADDRESS = re.compile(r"sasl_plaintext://127\.0\.0\.1:\d+/\w+: ")


def _login(bootstrap: str, conf: dict[str, Any]) -> tuple[bool, list[str]]:
    """(whether listing topics with `conf` succeeded, the authentication errors reported)."""
    errors: list[KafkaError] = []
    a = AdminClient({"bootstrap.servers": bootstrap, "error_cb": errors.append, **conf})

    def refusals() -> list[str]:
        found = {
            _ADDRESS.sub("", _TIMING.sub("", e.str()))
            for e in errors
            if e.code() == KafkaError._AUTHENTICATION
        }
        return sorted(found)

    deadline = time.monotonic() + 15
    while not refusals() and time.monotonic() < deadline:
        try:
            a.list_topics(timeout=1)
        except KafkaException:
            a.poll(0.1)
        else:
            return True, []
    return False, refusals()


def _described(admin: AdminClient, user: str, timeout: float = 30) -> Any:
    """`user`'s SCRAM credentials once the broker answering knows them. Apache Kafka
    acknowledges an alteration when its controller has committed it, and a broker answers
    a describe from the metadata it has applied, which can be a moment behind."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return admin.describe_user_scram_credentials([user])[user].result(30)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.RESOURCE_NOT_FOUND or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def confluent(bootstrap: str) -> dict[str, Any]:
    user = unique("scram-client")
    admin = AdminClient({"bootstrap.servers": bootstrap, **_conf("PLAIN", ADMIN, ADMIN_PASSWORD)})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    upsertion = UserScramCredentialUpsertion(user, info, PASSWORD.encode())
    admin.alter_user_scram_credentials([upsertion])[user].result(30)
    described = _described(admin, user)
    return {
        "described": [(i.mechanism.name, i.iterations) for i in described.scram_credential_infos],
        "right": _login(bootstrap, _conf("SCRAM-SHA-512", user, PASSWORD)),
        "wrong": _login(bootstrap, _conf("SCRAM-SHA-512", user, "nope")),
        "unknown_user": _login(bootstrap, _conf("SCRAM-SHA-512", user + "-x", PASSWORD)),
    }


def test_confluent_kafka(secure_brokers: dict[str, str]) -> None:
    on_bundled, on_kafka = on_both(secure_brokers, confluent)
    assert on_kafka["right"] == (True, [])
    assert on_kafka["wrong"][0] is False
    assert on_bundled == on_kafka


def _java_props(path: Path, mechanism: str, user: str, password: str) -> str:
    module = "org.apache.kafka.common.security.scram.ScramLoginModule"
    path.write_text(
        f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism={mechanism}\n"
        f'sasl.jaas.config={module} required username="{user}" password="{password}";\n'
    )
    return str(path)


def test_java_client(
    secure_brokers: dict[str, str], java_client: JavaClient, tmp_path: Path
) -> None:
    def scenario(bootstrap: str) -> Any:
        # a SCRAM credential for the super user `alice`, whom the authorizers let create
        # topics (a SCRAM credential and a PLAIN password are kept apart, as in Kafka)
        user = ADMIN
        admin = AdminClient(
            {"bootstrap.servers": bootstrap, **_conf("PLAIN", ADMIN, ADMIN_PASSWORD)}
        )
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
        upsertion = UserScramCredentialUpsertion(user, info, PASSWORD.encode())
        admin.alter_user_scram_credentials([upsertion])[user].result(30)
        _described(admin, user)
        files = [
            _java_props(tmp_path / "right", "SCRAM-SHA-256", user, PASSWORD),
            _java_props(tmp_path / "wrong", "SCRAM-SHA-256", user, "nope"),
        ]
        seen = java_client.run("secured", bootstrap, *files)
        if isinstance(seen["right"], dict):
            seen["right"]["read"] = [r["value"] for r in seen["right"]["read"]["records"]]
        return seen

    on_bundled, on_kafka = on_both(secure_brokers, scenario)
    assert on_kafka["right"]["offset"] == 0
    assert on_kafka["wrong"][0] == "SaslAuthenticationException"
    assert on_bundled == on_kafka


def kafka_configs(bootstrap: str, tmp_path: Path) -> dict[str, Any]:
    user = unique("scram-tool")
    admin_props = tmp_path / "admin.properties"
    admin_props.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{ADMIN}" password="{ADMIN_PASSWORD}";\n'
    )
    scram = tmp_path / "scram.properties"
    scram.write_text(f"SCRAM-SHA-256=iterations=5000,password={PASSWORD}\n")
    common = ["--command-config", str(admin_props), "--entity-type", "users"]

    def tool(*args: str) -> tuple[int, list[str]]:
        result = kafka_tool("kafka-configs", [*common, *args], bootstrap)
        return result.code, [line.replace(user, "<user>") for line in result.lines]

    return {
        "add": tool("--entity-name", user, "--alter", "--add-config-file", str(scram)),
        "describe": tool("--entity-name", user, "--describe"),
        "delete": tool("--entity-name", user, "--alter", "--delete-config", "SCRAM-SHA-256"),
        "describe_deleted": tool("--entity-name", user, "--describe"),
    }


def test_kafka_configs(secure_brokers: dict[str, str], tmp_path: Path) -> None:
    on_bundled, on_kafka = on_both(secure_brokers, lambda b: kafka_configs(b, tmp_path))
    assert on_kafka["add"] == (0, ["Completed updating config for user <user>."])
    assert on_bundled == on_kafka
