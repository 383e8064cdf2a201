"""A notebook's cells as a script: a Spark Connect session to the local server pyspark
starts (`remote("local[2]")`), the project run once on it, and what the notebook then
reads by name. Run by `test_connect.py` in a process of its own (pyspark starts the
server in the notebook's process, which must hold no Spark yet); the JSON it writes is
what the test checks.

    python notebook_child.py PROJECT OUT_JSON
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from tests.integration.runtime.test_connect import read_by_name
from warehouse import Project, local_connect_conf

root, out = Path(sys.argv[1]), Path(sys.argv[2])

spark = SparkSession.builder.remote("local[2]").config(map=local_connect_conf()).getOrCreate()
project = Project.load(root)
results = project.pipeline(spark).run(once=True)

out.write_text(
    json.dumps(
        {
            "connect": type(spark).__module__,
            "results": {r.table: r.to_dict() for r in results},
            "by_name": read_by_name(spark, project, "{layer}"),
        },
        default=str,
    )
)
spark.stop()
