"""Child process of the publish crash test: one `publish_changes` call, then exit 0.

Run as `python -m tests.integration.cdc.publish_child PATH BOOTSTRAP TOPIC TABLE`;
`WAREHOUSE_CRASH_POINT=publish_before_commit|publish_after_commit` makes it SIGKILL
itself inside or right after the Kafka transaction.
"""

from __future__ import annotations

import json
import logging
import sys

from streams.cdc import publish_changes


def main(argv: list[str]) -> int:
    path, bootstrap, topic, table = argv
    logging.basicConfig(level=logging.INFO)
    result = publish_changes(path, bootstrap=bootstrap, topic=topic, keys=["user_id"], table=table)
    print(
        json.dumps(
            {"first": result.first_version, "last": result.last_version, "records": result.records}
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
