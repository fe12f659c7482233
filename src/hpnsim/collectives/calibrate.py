"""Fit :class:`~hpnsim.collectives.nccl.NcclParams` to measured collective times.

A :class:`Measurement` is one measured sweep (an nccl-tests log: op, the GPUs it ran on,
time per size). :func:`calibrate` fits the efficiency and latency parameters so that
hpnsim's closed form (:func:`predict`, the model ``auto`` and the simulator share) matches
every measured time, then runs the simulation at the optimum and reports both residuals.

Method: bounded nonlinear least squares (``scipy.optimize.least_squares``, trust-region
reflective) on the log of predicted over measured time, so every size weighs the same
whether it takes 10 µs or 100 ms; bounds are :data:`~hpnsim.collectives.nccl.BOUNDS`.
Which parameters are fitted is decided from the data (:func:`identifiable`): a parameter
the predicted times do not depend on (NVLink efficiency on one GPU per host, the network
on one host, the network when NVLink is the bottleneck) or that moves them exactly as an
already chosen one does (its column of the Jacobian of log times is dependent on theirs)
is held at its default, and the result says why.

The result is a :class:`~hpnsim.collectives.calibration.Calibration`, written and read
back by :func:`~hpnsim.collectives.calibration.write_calibration` and
:func:`~hpnsim.collectives.calibration.load_calibration` (re-exported here).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from hpnsim.collectives.calibration import Calibration, load_calibration, write_calibration
from hpnsim.collectives.model import auto_candidates, model_time
from hpnsim.collectives.nccl import BOUNDS, NcclParams, resolve_nccl
from hpnsim.collectives.ops import (
    AUTO,
    PROTOCOLS,
    normalize_algorithm,
    normalize_op,
    normalize_protocol,
)
from hpnsim.collectives.options import CollectiveOptions
from hpnsim.collectives.shape import GroupShape
from hpnsim.errors import InputError

__all__ = ["FITTABLE", "Calibration", "Measurement", "calibrate", "elasticities",
           "identifiable", "load_calibration", "log_gpus", "predict", "write_calibration"]

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


@dataclass(frozen=True)
class Measurement:
    """One measured sweep: ``op`` on ``gpus`` (indices on the fabric, rank order), a time in
    seconds per size in bytes; ``lines`` are the log lines of the sizes (for residual tables),
    ``algo`` / ``protocol`` what the run forced (``auto``: NCCL chose).

    Examples
    --------
    >>> m = Measurement("log", "allreduce", range(8), [2**20], [4e-5])
    >>> m.op, m.gpus.size, m.sizes.tolist()
    ('allreduce', 8, [1048576.0])
    """

    source: str
    op: str
    gpus: np.ndarray
    sizes: np.ndarray
    times: np.ndarray
    lines: tuple = ()
    algo: str = AUTO
    protocol: str = AUTO

    def __post_init__(self) -> None:
        object.__setattr__(self, "op", normalize_op(self.op))
        object.__setattr__(self, "algo", normalize_algorithm(self.algo))
        object.__setattr__(self, "protocol", normalize_protocol(self.protocol))
        gpus = np.asarray(list(self.gpus) if isinstance(self.gpus, range) else self.gpus,
                          dtype=np.int64)
        sizes = np.asarray(self.sizes, dtype=float)
        times = np.asarray(self.times, dtype=float)
        if gpus.size < 2:
            raise InputError(self.source, "a collective needs at least 2 GPUs")
        if sizes.shape != times.shape or sizes.size == 0:
            raise InputError(self.source, "one time per size, at least one size")
        if not (np.all(sizes > 0) and np.all(np.isfinite(times)) and np.all(times > 0)):
            raise InputError(self.source, "sizes and times must be finite and > 0")
        object.__setattr__(self, "gpus", gpus)
        object.__setattr__(self, "sizes", sizes)
        object.__setattr__(self, "times", times)


def log_gpus(source: str, n_gpus: int, n_hosts: int | None, fabric) -> np.ndarray:
    """GPU indices a log's ranks ran on, placed on ``fabric``: the first GPUs of the first
    hosts.

    Parameters
    ----------
    source : str
        The log's name (errors carry it).
    n_gpus : int
        Ranks of the log.
    n_hosts : int or None
        Hosts of the log's rank lines (None: packed onto as few hosts as possible), each
        with ``n_gpus / n_hosts`` GPUs.
    fabric : Fabric
        Anything with ``n_gpus``, ``gpus_per_host`` and ``n_hosts``.

    Returns
    -------
    numpy.ndarray

    Raises
    ------
    InputError
        Named ``source`` when the fabric cannot hold that: more GPUs per host than the
        fabric's hosts have, more hosts than it has, or a GPU count the hosts do not share
        evenly.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> fab = SimpleNamespace(n_gpus=32, gpus_per_host=8, n_hosts=4)
    >>> log_gpus("a.log", 4, 2, fab).tolist()
    [0, 1, 8, 9]
    >>> log_gpus("b.log", 16, 1, fab)
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: b.log: the log ran 16 GPUs on 1 host(s), 16 per host; the fabric's hosts have 8 GPUs (give the fabric's --gpus-per-host or use a log from hosts like it)
    """
    per_host = fabric.gpus_per_host
    hosts = n_hosts or -(-n_gpus // per_host)
    if n_gpus % hosts:
        raise InputError(source, f"the log ran {n_gpus} GPUs on {hosts} hosts, not the same "
                                 f"number on each; hpnsim places equal hosts")
    local = n_gpus // hosts
    if local > per_host:
        raise InputError(source, f"the log ran {n_gpus} GPUs on {hosts} host(s), {local} per "
                                 f"host; the fabric's hosts have {per_host} GPUs (give the "
                                 f"fabric's --gpus-per-host or use a log from hosts like it)")
    if hosts > fabric.n_hosts:
        raise InputError(source, f"the log ran on {hosts} hosts; the fabric has "
                                 f"{fabric.n_hosts}")
    return (np.arange(hosts)[:, None] * per_host + np.arange(local)[None, :]).ravel()


def predict(fabric, m: Measurement, nccl=None) -> np.ndarray:
    """Closed-form time (s) of every size of ``m`` on ``fabric`` with ``nccl``: the forced
    algorithm and protocol, else the fastest ``auto`` would weigh (the choice NCCL's tuner and
    hpnsim's ``auto`` make, :func:`~hpnsim.collectives.model.choose_algorithm`); the minimum
    keeps the prediction continuous in the parameters as the choice changes.

    Parameters
    ----------
    fabric : Fabric
    m : Measurement
    nccl : NcclParams, dict or None
        The parameters to predict with (None: NCCL's defaults).

    Returns
    -------
    numpy.ndarray
        Seconds per size of ``m``.

    Examples
    --------
    >>> from hpnsim.fabrics import build_fabric
    >>> fab = build_fabric("hpn7", {"segments": 1, "hosts_per_segment": 1, "backup_hosts": 0})
    >>> m = Measurement("x", "allreduce", range(8), [2**30], [1.0], algo="ring",
    ...                 protocol="simple")
    >>> p = NcclParams(nvlink_efficiency=0.8, latency_scale=0.0)
    >>> round(float(predict(fab, m, p)[0] * 1e3), 4)    # 2·7/8·2^30 B / (200e9 B/s · 0.8)
    11.7441
    """
    nccl = resolve_nccl(nccl)
    shape = GroupShape.from_fabric(fabric, m.gpus, nccl=nccl)
    algos = auto_candidates(m.op, shape) if m.algo == AUTO else (m.algo,)
    protocols = PROTOCOLS if m.protocol == AUTO else (m.protocol,)
    return np.array([min(model_time(m.op, a, p, shape, float(s), nccl=nccl)
                         for a in algos for p in protocols) for s in m.sizes])


def _with(base: NcclParams, names, values) -> NcclParams:
    return base.replace(**{n: float(v) for n, v in zip(names, values, strict=True)})


def _log_residuals(fabric, measurements, base, names, values) -> np.ndarray:
    nccl = _with(base, names, values)
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
        diff = (_log_residuals(fabric, measurements, base, names, xu)
                - _log_residuals(fabric, measurements, base, names, xd))
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
        fit = least_squares(lambda x: _log_residuals(fabric, measurements, base, names, x),
                            x0, bounds=(low, high), x_scale="jac", method="trf",
                            xtol=1e-12, ftol=1e-12, gtol=1e-12)
        nccl, cost = _with(base, names, fit.x), float(fit.cost)
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
    from hpnsim.collectives.run import run_collective

    options = replace(options, algo=m.algo, protocol=m.protocol)
    return [run_collective(fabric, m.op, m.gpus, float(s), options).time for s in m.sizes]
