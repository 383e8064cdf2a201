"""SASL/PLAIN user config and token checks."""

from __future__ import annotations

import json

import pytest

from streams.broker.coordinator.sasl import SaslConfigError, check_plain, load_users


def test_users_from_inline_list_and_json_file(tmp_path):
    path = tmp_path / "users.json"
    path.write_text(json.dumps({"bob": "pw", "alice": "from-file"}))
    users = load_users({"sasl.users": "alice:s3:cret, carol:", "sasl.users.file": str(path)})
    assert users == {"alice": "from-file", "carol": "", "bob": "pw"}
    assert load_users({}) == {}


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"sasl.users": "alice"}, "sasl.users"),
        ({"sasl.users": ":pw"}, "sasl.users"),
        ({"sasl.users.file": "/does/not/exist.json"}, "sasl.users.file"),
    ],
)
def test_bad_user_config_names_the_key(raw, key):
    with pytest.raises(SaslConfigError) as info:
        load_users(raw)
    assert info.value.key == key and f"`{key}`" in str(info.value)


def test_bad_json_shape_is_refused(tmp_path):
    path = tmp_path / "users.json"
    path.write_text(json.dumps(["alice"]))
    with pytest.raises(SaslConfigError, match="JSON object"):
        load_users({"sasl.users.file": str(path)})


def test_plain_tokens():
    users = {"alice": "secret"}
    assert check_plain(users, b"\0alice\0secret") == "alice"
    assert check_plain(users, b"alice\0alice\0secret") == "alice"
    assert check_plain(users, b"\0alice\0wrong") is None
    assert check_plain(users, b"\0mallory\0secret") is None
    assert check_plain(users, b"bob\0alice\0secret") is None  # acting for someone else
    assert check_plain(users, b"alice-secret") is None
    assert check_plain(users, b"\0\xff\0secret") is None
