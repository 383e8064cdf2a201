"""Session settings for one Delta operation, restored after it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from pyspark.sql import SparkSession


@contextmanager
def session_confs(spark: SparkSession, confs: Mapping[str, str]) -> Iterator[None]:
    """Set `confs` on `spark` for the block; afterwards each key has its value from
    before again, or none when it had none. delta-spark reads some options of a write
    or a MERGE only from the session (the app transaction of a MERGE, a Parquet
    writer's settings, a vacuum's checks), and a micro-batch's session is its query's
    own clone, so one query's settings do not reach another's."""
    before = {k: spark.conf.get(k, None) for k in confs}
    for k, v in confs.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)
