"""Fit :class:`~hpnsim.collectives.nccl.params.NcclParams` to measured collective times.

A :class:`Measurement` is one measured sweep (an nccl-tests log: op, the GPUs it ran on,
time per size). :func:`calibrate` fits the efficiency and latency parameters so that
hpnsim's closed form (:func:`predict`, the model ``auto`` and the simulator share) matches
every measured time, then runs the simulation at the optimum and reports both residuals.

Method: bounded nonlinear least squares (``scipy.optimize.least_squares``, trust-region
reflective) on the log of predicted over measured time, so every size weighs the same
whether it takes 10 µs or 100 ms; bounds are :data:`~hpnsim.collectives.nccl.params.BOUNDS`.
Which parameters are fitted is decided from the data (:func:`identifiable`): a parameter
the predicted times do not depend on (NVLink efficiency on one GPU per host, the network
on one host, the network when NVLink is the bottleneck) or that moves them exactly as an
already chosen one does (its column of the Jacobian of log times is dependent on theirs)
is held at its default, and the result says why.

The measured sweeps and the closed form are in :mod:`hpnsim.collectives.nccl.measurement`, the
choice of parameters in :mod:`hpnsim.collectives.nccl.identifiability` (both re-exported here).
The result is a :class:`~hpnsim.collectives.nccl.calibration.Calibration`, written and read
back by :func:`~hpnsim.collectives.nccl.calibration.write_calibration` and
:func:`~hpnsim.collectives.nccl.calibration.load_calibration` (re-exported here).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from hpnsim.collectives.nccl.calibration import Calibration, load_calibration, write_calibration
from hpnsim.collectives.nccl.identifiability import (
    FITTABLE,
    MIN_ELASTICITY,  # noqa: F401  (kept importable from here)
    MIN_INDEPENDENT,  # noqa: F401  (kept importable from here)
    elasticities,
    identifiable,
    log_residuals,
    params_with,
)
from hpnsim.collectives.nccl.measurement import Measurement, log_gpus, predict
from hpnsim.collectives.nccl.params import BOUNDS, NcclParams, resolve_nccl  # noqa: F401  (doctest)
from hpnsim.collectives.planning.options import CollectiveOptions
from hpnsim.errors import InputError

__all__ = ["FITTABLE", "Calibration", "Measurement", "calibrate", "elasticities",
           "identifiable", "load_calibration", "log_gpus", "predict", "write_calibration"]


def calibrate(fabric, measurements, base=None, *, parameters=None, simulate: bool = True,
              options: CollectiveOptions | None = None, **keywords) -> Calibration:
    """Fit the parameters of ``base`` (None: NCCL's defaults) that ``measurements`` pin down
    (or exactly ``parameters``) so that :func:`predict` matches every measured time.

    Least squares on log(predicted/measured), bounded by :data:`BOUNDS`; with ``simulate``
    every size is then run in the simulator (:func:`~hpnsim.collectives.run_collective`
    with ``options``, whose fields ``keywords`` replace: ``routing=``, ``seed=``; each log's
    algorithm and protocol, the fitted NCCL parameters), and both residuals are reported.

    Parameters
    ----------
    fabric : Fabric
        The fabric the logs ran on (as ``hpnsim calibrate`` builds it).
    measurements : sequence of Measurement
        The measured sweeps (:func:`~hpnsim.workloads.nccl_tests.load_nccl_tests`).
    base : NcclParams, dict or None
        Starting point and the values of held parameters (None: NCCL's defaults).
    parameters : sequence of str, optional
        Fit exactly these (default: those :func:`identifiable` keeps).
    simulate : bool
        Also run every size in the simulator.
    options : CollectiveOptions, optional
        How the simulated collectives run (routing, seed); ``**keywords`` replace its
        fields.

    Returns
    -------
    Calibration

    Examples
    --------
    >>> from hpnsim.fabrics import build_fabric
    >>> fab = build_fabric("hpn7", {"segments": 1, "hosts_per_segment": 1, "backup_hosts": 0})
    >>> sizes = [2**k for k in range(10, 31, 4)]
    >>> truth = NcclParams(nvlink_efficiency=0.7, latency_scale=1.5)
    >>> m = Measurement("x", "allreduce", range(8), sizes, [1.0] * len(sizes))
    >>> m = Measurement("x", "allreduce", range(8), sizes, predict(fab, m, truth))
    >>> c = calibrate(fab, [m], simulate=False)
    >>> {k: round(v, 4) for k, v in c.fitted.items()}
    {'latency_scale': 1.5, 'nvlink_efficiency': 0.7}
    """
    from scipy.optimize import least_squares

    options = CollectiveOptions.build(options, **keywords)
    base = resolve_nccl(base)
    measurements = list(measurements)
    if not measurements:
        raise InputError("logs", "give at least one measured sweep")
    if parameters is None:
        names, held = identifiable(fabric, measurements, base)
    else:
        names, held = list(parameters), {}
        unknown = sorted(set(names) - set(BOUNDS))
        if unknown:
            raise InputError("parameters", f"{unknown[0]} cannot be fitted; choose from "
                                           f"{', '.join(FITTABLE)}")
    for name in FITTABLE:
        if name not in names and name not in held:
            held[name] = "not asked for"
    nccl, cost = base, 0.0
    if names:
        low = np.array([BOUNDS[n][0] for n in names], dtype=float)
        high = np.array([min(BOUNDS[n][1], 100.0) for n in names], dtype=float)
        span = high - low
        x0 = np.clip([float(getattr(base, n)) for n in names], low + 1e-6 * span,
                     high - 1e-6 * span)
        fit = least_squares(lambda x: log_residuals(fabric, measurements, base, names, x),
                            x0, bounds=(low, high), x_scale="jac", method="trf",
                            xtol=1e-12, ftol=1e-12, gtol=1e-12)
        nccl, cost = params_with(base, names, fit.x), float(fit.cost)
    result = Calibration(nccl=nccl, fitted={n: float(getattr(nccl, n)) for n in names},
                         held=held, cost=cost)
    for m in measurements:
        closed = predict(fabric, m, nccl)
        simulated = _simulated(fabric, m, replace(options, nccl=nccl)) if simulate else \
            [None] * m.sizes.size
        lines = list(m.lines) or [None] * m.sizes.size
        for size, meas, cf, sim, line in zip(m.sizes, m.times, closed, simulated, lines,
                                             strict=True):
            result.rows.append({"log": m.source, "line": line, "op": m.op,
                                "gpus": int(m.gpus.size), "size": float(size),
                                "measured": float(meas), "closed_form": float(cf),
                                "simulated": None if sim is None else float(sim)})
        result.sources.append({"file": m.source, "op": m.op, "gpus": int(m.gpus.size),
                               "algo": m.algo, "protocol": m.protocol,
                               "sizes": int(m.sizes.size)})
    return result


def _simulated(fabric, m: Measurement, options: CollectiveOptions) -> list[float]:
    from hpnsim.collectives.planning.run import run_collective

    options = replace(options, algo=m.algo, protocol=m.protocol)
    return [run_collective(fabric, m.op, m.gpus, float(s), options).time for s in m.sizes]
