"""Which NCCL parameters a set of measurements can pin down: elasticities and identifiability.

:func:`elasticities` is the matrix of d log(time) / d log(parameter) over every measured size;
:func:`identifiable` keeps the parameters of :data:`FITTABLE` the data see (some time moves by
:data:`MIN_ELASTICITY` of their relative change) and that do not move the times as the
already chosen ones do (QR with column pivoting, :data:`MIN_INDEPENDENT`), and says why each
other one is held. :func:`log_residuals` is the objective
:func:`~hpnsim.collectives.nccl.calibrate.calibrate` minimises.
"""

from __future__ import annotations

import math

import numpy as np

from hpnsim.collectives.nccl.measurement import Measurement, predict  # noqa: F401  (doctest)
from hpnsim.collectives.nccl.params import BOUNDS, NcclParams, resolve_nccl

__all__ = ["FITTABLE", "MIN_ELASTICITY", "MIN_INDEPENDENT", "elasticities", "identifiable",
           "log_residuals", "params_with"]

#: parameters calibration may fit: one latency scale (NCCL's tables times a factor) and the
#: link efficiencies; protocol efficiencies and caps stay NCCL's (tuning.cc), as the sizes of
#: one sweep cannot tell them from the latency and link terms
FITTABLE = ("latency_scale", "nvlink_efficiency", "network_efficiency", "nvls_efficiency")
#: a parameter is seen by the data when some time moves by at least this fraction per unit
#: relative change of the parameter (elasticity); below it, a 10% error in the parameter moves
#: no time by more than 0.2%, under the noise of any nccl-tests run
MIN_ELASTICITY = 0.02
#: a column of the elasticity matrix whose part independent of the chosen ones is below this
#: fraction of its norm is confounded with them (QR with column pivoting)
MIN_INDEPENDENT = 0.05


def params_with(base: NcclParams, names, values) -> NcclParams:
    """``base`` with the parameters ``names`` set to ``values``.

    >>> params_with(NcclParams(), ["latency_scale"], [2]).latency_scale
    2.0
    """
    return base.replace(**{n: float(v) for n, v in zip(names, values, strict=True)})


def log_residuals(fabric, measurements, base, names, values) -> np.ndarray:
    """log(predicted / measured) of every measured size, with ``names`` set to ``values``
    in ``base``: what the fit drives to zero."""
    nccl = params_with(base, names, values)
    return np.concatenate([np.log(predict(fabric, m, nccl) / m.times) for m in measurements])


def elasticities(fabric, measurements, base, names) -> np.ndarray:
    """d log(time) / d log(parameter) for every measured size (rows) and parameter of
    ``names`` (columns) at ``base``, by central differences of ±1% (one-sided at a bound).

    Parameters
    ----------
    fabric : Fabric
    measurements : sequence of Measurement
    base : NcclParams
    names : sequence of str
        Parameters of :data:`BOUNDS`.

    Returns
    -------
    numpy.ndarray
        One row per measured size (all measurements in order), one column per name.

    Examples
    --------
    >>> from hpnsim.fabrics import build_fabric
    >>> fab = build_fabric("hpn7", {"segments": 1, "hosts_per_segment": 1, "backup_hosts": 0})
    >>> m = Measurement("x", "allreduce", range(8), [2**30], [1.0], algo="ring",
    ...                 protocol="simple")
    >>> e = elasticities(fab, [m], NcclParams(latency_scale=0.0), ["nvlink_efficiency",
    ...                                                             "network_efficiency"])
    >>> np.round(e, 3).tolist()     # time ∝ 1/nvlink_efficiency; one host: no network
    [[-1.0, 0.0]]
    """
    base = resolve_nccl(base)
    x = np.array([getattr(base, n) for n in names], dtype=float)
    out = np.zeros((sum(m.sizes.size for m in measurements), len(names)))
    for j, name in enumerate(names):
        low, high = BOUNDS[name]
        step = 0.01 * max(abs(x[j]), 1e-3)
        up, down = min(x[j] + step, high), max(x[j] - step, low)
        xu, xd = x.copy(), x.copy()
        xu[j], xd[j] = up, down
        diff = (log_residuals(fabric, measurements, base, names, xu)
                - log_residuals(fabric, measurements, base, names, xd))
        out[:, j] = diff / (math.log(up) - math.log(down)) if down > 0 else \
            diff / ((up - down) / max(x[j], 1e-12))
    return out


def identifiable(fabric, measurements, base=None,
                 names=FITTABLE) -> tuple[list[str], dict[str, str]]:
    """The parameters of ``names`` the measurements can pin down at ``base``, and why each
    other one is held.

    A parameter is held when no measured time moves by :data:`MIN_ELASTICITY` of its relative
    change, or when its elasticity column is (to :data:`MIN_INDEPENDENT`) a combination of
    the columns already kept (QR with column pivoting: the most informative first).

    Parameters
    ----------
    fabric : Fabric
    measurements : sequence of Measurement
    base : NcclParams, optional
        Where the elasticities are taken (None: NCCL's defaults).
    names : sequence of str, optional
        Candidates (default: every fittable parameter).

    Returns
    -------
    tuple
        ``(kept names, {held name: reason})``.

    Examples
    --------
    >>> from hpnsim.fabrics import build_fabric
    >>> fab = build_fabric("hpn7", {"segments": 1, "hosts_per_segment": 1, "backup_hosts": 0})
    >>> m = Measurement("x", "allreduce", range(8), [2**10, 2**20, 2**30], [1.0] * 3)
    >>> kept, held = identifiable(fab, [m], NcclParams())
    >>> kept, sorted(held)
    (['latency_scale', 'nvlink_efficiency'], ['network_efficiency', 'nvls_efficiency'])
    """
    from scipy.linalg import qr

    base = resolve_nccl(base)
    names = list(names)
    held: dict[str, str] = {}
    if not base.nvls and "nvls_efficiency" in names:
        names.remove("nvls_efficiency")
        held["nvls_efficiency"] = "the GPUs have no NVLink SHARP (NVLS)"
    e = elasticities(fabric, measurements, base, names)
    seen = []
    for j, name in enumerate(names):
        if np.max(np.abs(e[:, j])) < MIN_ELASTICITY:
            held[name] = (f"no measured time depends on it (largest elasticity "
                          f"{np.max(np.abs(e[:, j])):.3f} < {MIN_ELASTICITY})")
        else:
            seen.append(j)
    if not seen:
        return [], held
    sub = e[:, seen]
    _, r, order = qr(sub, pivoting=True, mode="economic")
    kept = []
    for k, col in enumerate(order):
        norm = float(np.linalg.norm(sub[:, col]))
        name = names[seen[col]]
        if k < r.shape[0] and abs(r[k, k]) >= MIN_INDEPENDENT * norm:
            kept.append(name)
        else:
            held[name] = ("moves the times as " + ", ".join(kept) + " do (confounded with "
                          "them in these measurements)")
    return [n for n in names if n in kept], held
