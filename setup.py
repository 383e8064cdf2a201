"""The one compiled part: streams.kafka._rdfetch, the Kafka source's column reader.

Everything else is declared in pyproject.toml. The extension is optional: where no C
compiler is found the install goes on, and the source reads with confluent-kafka's
`Consumer` (streams/kafka/_fetch.py says how each is chosen).
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
        )
    ]
)
