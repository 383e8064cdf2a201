"""Locations as text and the settings that reach them: no server, no I/O."""

from __future__ import annotations

import os

import pytest

import streams.storage as storage
import streams.storage.settings
from streams.storage import (
    StorageConfigError,
    StorageSettings,
    is_local,
    join,
    local_path,
    parent,
    resolve,
    scheme,
)
from warehouse.spec.config import resolve_config

AWS = {
    "AWS_ACCESS_KEY_ID": "key",
    "AWS_SECRET_ACCESS_KEY": "secret",
    "AWS_REGION": "eu-west-1",
    "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
}


def test_locations_are_paths_or_uris() -> None:
    assert scheme("s3a://b/wh") == "s3a" and scheme("/tmp/wh") == "file"
    assert is_local("/tmp/wh") and is_local("file:///tmp/wh") and not is_local("s3://b/wh")
    assert local_path("file:///tmp/w%20h") == "/tmp/w h" and local_path("gs://b/x") is None
    assert join("s3a://b/wh/", "tables", "/t/") == "s3a://b/wh/tables/t"
    assert join("/tmp/wh", "checkpoints", "t") == "/tmp/wh/checkpoints/t"
    assert parent("s3a://b/wh/tables/t") == "s3a://b/wh/tables"
    assert resolve("s3a://b/wh/", "/proj") == "s3a://b/wh"
    assert resolve(".warehouse", "/proj") == "/proj/.warehouse"


def test_the_aws_variables_alone_reach_a_custom_endpoint_on_both_sides() -> None:
    s = StorageSettings.from_environ(AWS)
    assert s.object_store_options("s3a://b/wh/tables/t") == {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
        "AWS_REGION": "eu-west-1",
        "AWS_ALLOW_HTTP": "true",
    }
    assert s.object_store_options("/tmp/wh/tables/t") is None
    conf = s.hadoop_conf()
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.endpoint.region"] == "eu-west-1"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert conf["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    # Credentials stay with the clients, which read the variables themselves.
    assert not any("secret" in v or v == "key" for v in conf.values())


def test_aws_itself_is_virtual_hosted_and_https() -> None:
    s = StorageSettings.from_environ({"AWS_REGION": "us-east-1"})
    assert s.object_store_options("s3://b/t") == {
        "AWS_REGION": "us-east-1",
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "true",
    }
    assert s.hadoop_conf()["spark.hadoop.fs.s3a.path.style.access"] == "false"
    assert "spark.hadoop.fs.s3a.endpoint" not in s.hadoop_conf()


def test_the_storage_section_says_what_the_variables_cannot(tmp_path) -> None:
    config = resolve_config(
        {
            "warehouse_root": "s3a://bucket/wh/",
            "storage": {
                "endpoint": "${S3_URL}",
                "options": {"aws_access_key_id": "${KEY}"},
                "hadoop": {"fs.s3a.connection.maximum": 50},
                "lease_seconds": 10,
            },
        },
        environ={"S3_URL": "https://s3.example:9000", "KEY": "k-123"},
    )
    assert config.root_location(tmp_path) == "s3a://bucket/wh"
    s = config.storage_settings(AWS)
    assert s.endpoint == "https://s3.example:9000" and s.lease_seconds == 10
    assert s.object_store_options("s3://bucket/wh")["aws_access_key_id"] == "k-123"
    assert "AWS_ALLOW_HTTP" not in s.object_store_options("s3://bucket/wh")
    assert s.hadoop_conf()["spark.hadoop.fs.s3a.connection.maximum"] == "50"
    assert "k-123" not in repr(s) and "k-123" not in repr(config)


def test_an_endpoint_without_a_scheme_is_refused() -> None:
    with pytest.raises(StorageConfigError, match="`minio:9000` has no scheme"):
        StorageSettings.from_environ({"AWS_ENDPOINT_URL": "minio:9000"})


def test_a_location_without_a_file_system_here_is_refused_by_name() -> None:
    location = "wasb://container@account.blob.core.windows.net/wh/t"
    with pytest.raises(StorageConfigError, match=f"No file system for `{location}`"):
        StorageSettings.from_environ({}).filesystem(location)


def test_the_layout_under_a_uri_root_stays_a_uri(tmp_path) -> None:
    from warehouse.spec import paths

    root = "s3a://bucket/wh"
    assert paths.table_path(root, "t") == "s3a://bucket/wh/tables/t"
    assert paths.checkpoint_path(root, "t") == "s3a://bucket/wh/checkpoints/t"
    assert paths.lock_file(paths.checkpoint_path(root, "t")) == "s3a://bucket/wh/checkpoints/t.lock"
    assert paths.quality_state_path(root) == "s3a://bucket/wh/quality/state.json"
    # The embedded broker keeps its log on a local disk, in the project's folder.
    assert paths.broker_dir(tmp_path, root, None) == tmp_path / ".warehouse" / "broker"
    assert paths.broker_dir(tmp_path, str(tmp_path / "w"), None) == tmp_path / "w" / "broker"


def test_a_tasks_section_holds_for_its_block_only(monkeypatch) -> None:
    """A Spark task runs under the driver's section (`configured`); the Python worker's
    own settings come back after it, for the next task's work."""
    monkeypatch.delenv(streams.storage.settings.SETTINGS_VARIABLE, raising=False)
    monkeypatch.setattr(storage.settings, "_configured", None)
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    with storage.configured({"region": "ap-south-1", "options": {"aws_x": "1"}}):
        assert storage.current().region == "ap-south-1"
        assert storage.overrides() == {"region": "ap-south-1", "options": {"aws_x": "1"}}
    assert storage.current().region == "eu-west-1"
    assert storage.overrides() == {}
    assert streams.storage.settings.SETTINGS_VARIABLE not in os.environ
    storage.configure({"region": "us-east-2"})
    with storage.configured(None):
        assert storage.current().region == "eu-west-1"
    assert storage.current().region == "us-east-2"
