"""A measured collective sweep, where its ranks ran, and what hpnsim's closed form predicts for it.

A :class:`Measurement` is one measured sweep (an nccl-tests log: op, the GPUs it ran on,
time per size); :func:`log_gpus` places a log's ranks on a fabric; :func:`predict` is the
closed-form time of every size (the model ``auto`` and the simulator share), what
:func:`~hpnsim.collectives.nccl.calibrate.calibrate` fits to the measured times.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hpnsim.collectives.closed_form.model import auto_candidates, model_time
from hpnsim.collectives.closed_form.shape import GroupShape
from hpnsim.collectives.nccl.params import NcclParams, resolve_nccl  # noqa: F401  (doctest)
from hpnsim.collectives.ops import (
    AUTO,
    PROTOCOLS,
    normalize_algorithm,
    normalize_op,
    normalize_protocol,
)
from hpnsim.errors import InputError

__all__ = ["Measurement", "log_gpus", "predict"]


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
    hpnsim's ``auto`` make, :func:`~hpnsim.collectives.closed_form.model.choose_algorithm`); the minimum
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
