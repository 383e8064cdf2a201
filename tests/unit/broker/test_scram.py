"""The SCRAM server against RFC 7677's SCRAM-SHA-256 example exchange, and what it refuses."""

from __future__ import annotations

import base64

import pytest

from streams.broker.security.scram import (
    MECHANISMS,
    ScramAuthenticationError,
    ScramServer,
    credential_from_password,
)

SHA256 = MECHANISMS["SCRAM-SHA-256"]
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"


def _server(password: str = "pencil") -> ScramServer:
    credential = credential_from_password(SHA256, password, iterations=4096, salt=SALT)
    return ScramServer(
        SHA256, lambda user: credential if user == "user" else None, nonce=lambda: SERVER_NONCE
    )


def test_rfc7677_example_exchange() -> None:
    server = _server()
    first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    final = server.evaluate(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.username == "user"


def test_a_wrong_password_a_changed_nonce_and_an_unknown_user_are_refused() -> None:
    final = (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    wrong = _server(password="not-pencil")
    wrong.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    with pytest.raises(ScramAuthenticationError, match="invalid client proof"):
        wrong.evaluate(final)
    assert not wrong.complete

    other_nonce = _server()
    other_nonce.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    with pytest.raises(ScramAuthenticationError, match="nonce"):
        other_nonce.evaluate(final.replace(b"k0,p=", b"k1,p="))

    with pytest.raises(ScramAuthenticationError, match="no SCRAM-SHA-256 credential"):
        _server().evaluate(b"n,,n=nobody,r=abc")
    with pytest.raises(ScramAuthenticationError, match="format"):
        _server().evaluate(b"y,,n=user,r=abc")  # channel binding is not offered


def test_the_credential_keeps_no_password() -> None:
    credential = credential_from_password(SHA256, "pencil", iterations=4096, salt=SALT)
    assert "pencil" not in repr(credential) and str(SALT) not in repr(credential)
    assert credential.iterations == 4096
