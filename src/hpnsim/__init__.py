"""hpnsim: design, simulate and schedule the networks that train large language models.

>>> import hpnsim as hs
>>> hs.units.parse_bandwidth("400Gbps")
50000000000.0
"""

from hpnsim import errors, units
from hpnsim.errors import HpnsimError, InputError

__version__ = "0.1.0"

__all__ = ["HpnsimError", "InputError", "errors", "units", "__version__"]
