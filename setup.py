"""The compiled parts, both optional: where no C compiler is found the install goes on
and the framework uses the Python code they stand in for.

- streams.kafka._rdfetch: the Kafka source's column reader (else confluent-kafka's
  `Consumer`; streams/kafka/_fetch.py says how each is chosen);
- streams.landing._flatjson: the landing path's flat JSON parser (else Arrow's JSON
  reader takes every value; streams/landing/arrow_json.py).

Everything else is declared in pyproject.toml.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
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
