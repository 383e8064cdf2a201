"""pyspark's NumPy converters for py4j, without their import of `pyspark.testing`.

pyspark registers two py4j input converters, for NumPy arrays and NumPy scalars, whose
`can_convert` runs for every argument of every call to the JVM and imports
`pyspark.testing.utils` to learn whether NumPy is installed. That module imports pandas,
`unittest` and looks for a dozen optional packages: 0.3 s of CPU on an idle machine
(1-2 s of a fresh `warehouse run --once` at a load of 20) in a driver that otherwise
never imports pandas (docs/decisions/0058). An object is a NumPy array or scalar only
if NumPy is imported already, so asking `sys.modules` answers the same.
"""

from __future__ import annotations

import sys
from typing import Any

from py4j import protocol
from pyspark.sql.types import NumpyArrayConverter, NumpyScalarConverter


class _ArrayConverter(NumpyArrayConverter):
    def can_convert(self, obj: Any) -> bool:
        np = sys.modules.get("numpy")
        return np is not None and isinstance(obj, np.ndarray) and obj.ndim == 1


class _ScalarConverter(NumpyScalarConverter):
    def can_convert(self, obj: Any) -> bool:
        np = sys.modules.get("numpy")
        return np is not None and isinstance(obj, np.generic)


def install() -> None:
    """Put the converters above in place of pyspark's in py4j's list, where they are (a
    gateway made before holds the same list)."""
    for i, converter in enumerate(protocol.INPUT_CONVERTER):
        if type(converter) is NumpyArrayConverter:
            protocol.INPUT_CONVERTER[i] = _ArrayConverter()
        elif type(converter) is NumpyScalarConverter:
            protocol.INPUT_CONVERTER[i] = _ScalarConverter()
