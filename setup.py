"""The compiled parts, both optional: where no C compiler is found the install goes on
and the framework uses the Python code they stand in for.

- streams.kafka._rdfetch: the Kafka source's column reader (else confluent-kafka's
  `Consumer`; streams/kafka/fetch.py says how each is chosen);
- streams.landing._flatjson: the landing path's flat JSON parser (else Arrow's JSON
  reader takes every value; streams/landing/arrow_json.py).

`WAREHOUSE_PURE_WHEEL=1` leaves both out, for a wheel that installs on any platform
(`py3-none-any`), such as one built on a laptop for a Databricks cluster, whose native
engines do not use them. Everything else is declared in pyproject.toml.
"""

import os

from setuptools import Extension, setup

PURE = os.environ.get("WAREHOUSE_PURE_WHEEL", "") not in ("", "0")

setup(
    ext_modules=[]
    if PURE
    else [
        Extension(
            "streams.kafka._rdfetch",
            sources=["streams/kafka/_rdfetch.c"],
            libraries=["dl"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wno-missing-braces"],
            optional=True,
        ),
        Extension(
            "streams.landing._flatjson",
            sources=["streams/landing/_flatjson.c"],
            extra_compile_args=["-O2", "-std=c11", "-Wall"],
            optional=True,
        ),
    ]
)
