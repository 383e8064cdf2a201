"""The compiled part, optional: streams.landing._flatjson, the landing path's flat JSON
parser. Where no C compiler is found the install goes on and Arrow's JSON reader takes
every value (streams/landing/arrow_json.py).

`WAREHOUSE_PURE_WHEEL=1` leaves it out, for a wheel that installs on any platform
(`py3-none-any`), such as one built on a laptop for a Databricks cluster, whose native
engines do not use it. Everything else is declared in pyproject.toml.
"""

import os

from setuptools import Extension, setup

PURE = os.environ.get("WAREHOUSE_PURE_WHEEL", "") not in ("", "0")

setup(
    ext_modules=[]
    if PURE
    else [
        Extension(
            "streams.landing._flatjson",
            sources=["streams/landing/_flatjson.c"],
            extra_compile_args=["-O2", "-std=c11", "-Wall"],
            optional=True,
        ),
    ]
)
