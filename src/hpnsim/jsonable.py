"""Plain JSON data from results: numpy scalars and arrays, NaN, objects with ``to_dict``.

A leaf module (it imports nothing from hpnsim), so every layer can make its results
JSON-ready: the fabric exports as much as the CLI's ``--json``.
"""

from __future__ import annotations

import math
from typing import Any


def to_jsonable(value: Any) -> Any:
    """Convert numpy scalars and arrays, NaN (to None) and objects with ``to_dict``, recursively.

    Examples
    --------
    >>> import numpy as np
    >>> to_jsonable({"a": np.arange(2), "b": float("nan")})
    {'a': [0, 1], 'b': None}
    """
    import numpy as np

    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return [to_jsonable(v) for v in value.tolist()]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating | float):
        value = float(value)
        return value if math.isfinite(value) else None
    if hasattr(value, "to_dict"):
        return to_jsonable(value.to_dict())
    return value
