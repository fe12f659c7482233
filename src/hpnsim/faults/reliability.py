"""Reliability economics: expected job interruptions, lost GPU-hours and their cost per month.

A synchronous training job stops when one of its hosts is cut off. Which failures cut a host
off depends on the ToR design (docs/reliability.md states every assumption and its source):

- single ToR: any access link or ToR of the job's NICs;
- non-stacked dual ToR (HPN): a NIC is cut off when both its sides are down, a side being its
  access link or the ToR behind it (a failure that finds the other side still down);
- stacked dual ToR: as non-stacked, and a ToR failure also takes its pair (the rack) down with
  probability ``stacked_pair_loss``.

Components fail as Poisson processes with monthly rates and stay down for a repair time; a
component is down while any of its repairs runs (an M/G/inf queue, so
``P(down) = 1 - exp(-rate * mean repair)`` for any repair distribution). A failure that
finds the job's other side down interrupts the job; by PASTA and independence its probability
is a product of those ``P(down)``, which makes :func:`expected_reliability` exact for the
process :func:`~hpnsim.faults.montecarlo.monte_carlo` draws. Agg and core failures do not
interrupt (ECMP rehashes over the remaining paths, issue 10); they are reported as degrading
events.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace

import numpy as np

from hpnsim.errors import InputError, read_user_text
from hpnsim.fabrics.fabric import Fabric, LinkKind, NodeKind

#: hours in an average month (8,760 h / 12)
HOURS_PER_MONTH = 730.0
#: HPN (SIGCOMM 2024, reference/hpn.md): about 0.057% of NIC-ToR links fail per month
LINK_PER_MONTH = 0.057e-2
#: HPN: about 0.051% of ToRs have critical errors or crash per month (single-chip switches)
TOR_PER_MONTH = 0.051e-2
#: Singh et al., "Surviving switch failures in cloud datacenters", CCR 2021 (180,000 Azure
#: switches): half of switch failures last under 6 minutes. An exponential with that median
#: has mean 6 min / ln 2 = 8.66 min; used for links too (no published link figure here).
REPAIR_HOURS = 6.0 / 60.0 / math.log(2.0)
#: HPN: checkpoints every 2-4 hours (the midpoint), about 100 s to write 30 GB per GPU
CHECKPOINT_INTERVAL_S = 3 * 3600.0
CHECKPOINT_WRITE_S = 100.0
#: reading the checkpoint back at the bandwidth it was written with (HPN's 100 s); a lower
#: bound: scheduler, container and NCCL start-up come on top (--restart-s)
RESTART_S = CHECKPOINT_WRITE_S
#: a dead peer shows up as a collective that times out: PyTorch ProcessGroupNCCL's default
#: timeout is 10 minutes (kProcessGroupNCCLDefaultTimeout)
DETECTION_S = 600.0
DESIGNS = ("single", "stacked", "nonstacked")
SWITCH_KINDS = ("single-chip", "chassis")
REPAIR_DISTRIBUTIONS = ("exponential", "fixed")


def _number(value, field: str, low: float = 0.0, high: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or not low <= value <= high:
        span = f"a number >= {low:g}" if high == math.inf else f"a number in {low:g}..{high:g}"
        raise InputError(field, f"must be {span}, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class FailureRates:
    """Failure rates (fraction of components failing per month) and repair times (hours).

    ``agg_per_month`` defaults to the ToR rate (the same single-chip 51.2T switch) and
    ``uplink_per_month`` to the access-link rate (the same optics); both are assumptions.

    >>> FailureRates(link_per_month=-1)
    Traceback (most recent call last):
    hpnsim.errors.InputError: link_per_month: must be a number >= 0, got -1
    """

    link_per_month: float = LINK_PER_MONTH
    tor_per_month: float = TOR_PER_MONTH
    agg_per_month: float = TOR_PER_MONTH
    uplink_per_month: float = LINK_PER_MONTH
    link_repair_hours: float = REPAIR_HOURS
    switch_repair_hours: float = REPAIR_HOURS
    repair_distribution: str = "exponential"

    def __post_init__(self):
        for f in fields(self):
            if f.name != "repair_distribution":
                _number(getattr(self, f.name), f.name)
        if self.repair_distribution not in REPAIR_DISTRIBUTIONS:
            raise InputError("repair_distribution", f"choose one of "
                             f"{', '.join(REPAIR_DISTRIBUTIONS)}, got {self.repair_distribution!r}")


@dataclass(frozen=True)
class CheckpointPolicy:
    """Checkpoint interval and write time, restart time and failure detection time (seconds).

    >>> CheckpointPolicy().lost_seconds_per_interruption   # 5400 + 600 + 100
    6100.0
    """

    interval_s: float = CHECKPOINT_INTERVAL_S
    write_s: float = CHECKPOINT_WRITE_S
    restart_s: float = RESTART_S
    detection_s: float = DETECTION_S

    def __post_init__(self):
        for f in fields(self):
            _number(getattr(self, f.name), f.name)
        if self.interval_s <= 0:
            raise InputError("interval_s", f"must be > 0, got {self.interval_s!r}")

    @property
    def lost_seconds_per_interruption(self) -> float:
        """Rollback to the last checkpoint (half an interval on average) + detection + restart."""
        return self.interval_s / 2 + self.detection_s + self.restart_s

    @property
    def overhead_share(self) -> float:
        """Share of the time spent writing checkpoints (training stalls while it writes)."""
        return self.write_s / self.interval_s


def load_rates(path) -> FailureRates:
    """Failure rates from a JSON or YAML file ``{link_per_month: 0.0006, ...}``; keys left
    out keep their defaults.

    >>> load_rates("/nonexistent.yaml")
    Traceback (most recent call last):
    hpnsim.errors.InputError: rates: cannot read /nonexistent.yaml: No such file or directory
    """
    from hpnsim.errors import read_user_yaml

    text = read_user_text(path, "rates")
    try:   # JSON is YAML: one bounded reader for both
        data, _ = read_user_yaml(text, "rates")
    except InputError as error:
        raise InputError("rates", f"{path}: {error.message}" if error.field == "rates"
                         else f"{path}: {error.field}: {error.message}") from None
    if not isinstance(data, dict):
        raise InputError("rates", f"{path} must hold a mapping of rate names to numbers")
    known = [f.name for f in fields(FailureRates)]
    for key in data:
        if key not in known:
            raise InputError("rates", f"unknown key {key!r} in {path}; known: {', '.join(known)}")
    return FailureRates(**data)


@dataclass(frozen=True)
class JobExposure:
    """The components a job on the first ``gpus`` GPUs of a fabric depends on.

    ``nic_link`` and ``nic_tor`` are ``(nics, sides)``: the access links of each NIC and the
    ToR behind each (indices local to the job, ``0..links-1`` and ``0..tors-1``);
    ``tor_sibling`` is the other ToR of a dual-ToR pair (-1 with a single ToR).
    """

    gpus: int
    hosts: int
    design: str
    nic_link: np.ndarray
    nic_tor: np.ndarray
    tor_sibling: np.ndarray
    aggs: int
    uplinks: int
    core_links: int

    @property
    def links(self) -> int:
        return int(self.nic_link.size)

    @property
    def tors(self) -> int:
        return int(self.tor_sibling.size)

    def counts(self) -> dict:
        """Component counts (JSON-ready)."""
        return {"gpus": self.gpus, "hosts": self.hosts, "nics": int(self.nic_link.shape[0]),
                "access_links": self.links, "tors": self.tors, "aggs": self.aggs,
                "tor_uplinks": self.uplinks, "core_links": self.core_links}


def fabric_design(fabric: Fabric) -> str:
    """The ToR design of a built fabric: ``meta["dual_tor"]``, else from its links."""
    design = fabric.meta.get("dual_tor")
    if design in DESIGNS:
        return design
    if fabric.ports_per_nic == 1 or len(np.unique(fabric.gpu_tor[0])) == 1:
        return "single"
    return "stacked" if (fabric.link_kind == LinkKind.PEER).any() else "nonstacked"


def job_exposure(fabric: Fabric, gpus: int) -> JobExposure:
    """Components the job on GPUs ``0..gpus-1`` (whole hosts first) depends on.

    >>> from hpnsim.fabrics import hpn7
    >>> e = job_exposure(hpn7(segments=2), 2048)
    >>> e.counts()
    {'gpus': 2048, 'hosts': 256, 'nics': 2048, 'access_links': 4096, 'tors': 32, 'aggs': 120, 'tor_uplinks': 1920, 'core_links': 0}
    """
    if isinstance(gpus, bool) or not isinstance(gpus, int) or not 1 <= gpus <= fabric.n_gpus:
        raise InputError("gpus", f"must be an integer in 1..{fabric.n_gpus:,} (the fabric's "
                                 f"GPUs), got {gpus!r}")
    if gpus % fabric.gpus_per_host:
        raise InputError("gpus", f"must be whole hosts, a multiple of {fabric.gpus_per_host} "
                                 f"GPUs, got {gpus} (a host's NICs and ToRs fail for all its "
                                 f"GPUs; a job does not hold part of one)")
    design = fabric_design(fabric)
    links = fabric.gpu_access_link[:gpus]
    if design == "single":   # one failure unit per NIC (a bond to one ToR is one link)
        links = links[:, :1]
    tor_nodes = fabric.link_dst[links]
    tors, nic_tor = np.unique(tor_nodes, return_inverse=True)
    nic_tor = nic_tor.reshape(tor_nodes.shape)
    sibling = np.full(len(tors), -1, dtype=np.int64)
    if nic_tor.shape[1] == 2:
        sibling[nic_tor[:, 0]] = nic_tor[:, 1]
        sibling[nic_tor[:, 1]] = nic_tor[:, 0]
    dst_kind = fabric.node_kind[fabric.link_dst]
    gpu_nodes = fabric.gpu_node[:gpus]
    segments = np.unique(fabric.node_segment[gpu_nodes] + 1_000_003 * fabric.node_pod[gpu_nodes])
    aggs = uplinks = core = 0
    if len(segments) > 1:   # one segment: same-rail traffic never leaves its ToR
        up = (fabric.link_kind == LinkKind.UPLINK) & np.isin(fabric.link_src, tors) \
            & (dst_kind == NodeKind.AGG)
        uplinks = int(up.sum())
        agg_nodes = np.unique(fabric.link_dst[up])
        aggs = len(agg_nodes)
        if len(np.unique(fabric.node_pod[gpu_nodes])) > 1:
            core = int(((fabric.link_kind == LinkKind.CORE) & np.isin(fabric.link_src, agg_nodes)
                        & (dst_kind == NodeKind.CORE)).sum())
    nic_link = np.arange(nic_tor.size, dtype=np.int64).reshape(nic_tor.shape)
    return JobExposure(gpus=gpus, hosts=-(-gpus // fabric.gpus_per_host), design=design,
                       nic_link=nic_link, nic_tor=nic_tor.astype(np.int64),
                       tor_sibling=sibling, aggs=aggs, uplinks=uplinks, core_links=core)


def _down(rate_per_month: float, repair_hours: float) -> float:
    """P(a component is down): at least one repair running in an M/G/inf queue."""
    return -math.expm1(-rate_per_month * repair_hours / HOURS_PER_MONTH)


@dataclass(frozen=True)
class Conditions:
    """Everything besides the exposure: rates, policy, price, switch kind, stacked pair loss."""

    rates: FailureRates
    policy: CheckpointPolicy
    gpu_hour_price: float | None   # None: counts and GPU-hours only, no cost
    switch: str = "single-chip"
    chassis_factor: float | None = None
    stacked_pair_loss: float | None = None

    def __post_init__(self):
        if self.gpu_hour_price is not None:
            _number(self.gpu_hour_price, "gpu_hour_price")
        if self.switch not in SWITCH_KINDS:
            raise InputError("switch", f"choose one of {', '.join(SWITCH_KINDS)}, "
                                       f"got {self.switch!r}")
        if self.switch == "chassis":
            if self.chassis_factor is None:
                raise InputError("chassis_factor", "chassis switches need a failure-rate factor "
                                 "over single-chip ones (HPN: 'several times', no figure given)")
            _number(self.chassis_factor, "chassis_factor")
        if self.stacked_pair_loss is not None:
            _number(self.stacked_pair_loss, "stacked_pair_loss", 0.0, 1.0)

    def switch_factor(self) -> float:
        return self.chassis_factor if self.switch == "chassis" else 1.0

    def pair_loss(self, design: str) -> float:
        if design != "stacked":
            return 0.0
        if self.stacked_pair_loss is None:
            raise InputError("stacked_pair_loss", "a stacked pair needs the probability that a "
                             "ToR failure takes both ToRs down (0..1; no published figure)")
        return self.stacked_pair_loss


def trigger_probabilities(exposure: JobExposure, cond: Conditions) -> tuple[np.ndarray, np.ndarray]:
    """Per access link and per ToR: P(its failure interrupts the job) (see the module doc)."""
    r = cond.rates
    tor_rate = r.tor_per_month * cond.switch_factor()
    if exposure.design == "single":
        return np.ones(exposure.links), np.ones(exposure.tors)
    u_link = _down(r.link_per_month, r.link_repair_hours)
    u_tor = _down(tor_rate, r.switch_repair_hours)
    link_p = np.full(exposure.links, 1 - (1 - u_link) * (1 - u_tor))
    nics_on_tor = np.bincount(exposure.nic_tor.ravel(), minlength=exposure.tors)
    tor_p = 1 - (1 - u_tor) * (1 - u_link) ** nics_on_tor
    q = cond.pair_loss(exposure.design)
    return link_p, q + (1 - q) * tor_p


@dataclass(frozen=True)
class ReliabilityResult:
    """Expected interruptions, lost GPU-hours and cost per month of one job on one design."""

    design: str
    switch: str
    exposure: dict
    interruptions_per_month: float
    interruptions_from_links: float
    interruptions_from_tors: float
    lost_gpu_hours_per_month: float
    rollback_restart_gpu_hours_per_month: float
    checkpoint_gpu_hours_per_month: float
    cost_per_month: float | None
    degraded_nic_hours_per_month: float
    agg_failures_per_month: float
    uplink_failures_per_month: float
    inputs: dict

    def to_dict(self) -> dict:
        return asdict(self)


def expected_reliability(exposure: JobExposure, cond: Conditions) -> ReliabilityResult:
    """Expected interruptions, lost GPU-hours and cost per month (closed form).

    >>> from hpnsim.fabrics import hpn7
    >>> e = job_exposure(hpn7(segments=1, hosts_per_segment=16, dual_tor="single"), 128)
    >>> r = expected_reliability(e, Conditions(FailureRates(), CheckpointPolicy(), 2.0))
    >>> round(r.interruptions_per_month, 6)   # 128 links x 0.057% + 8 ToRs x 0.051%
    0.07704
    """
    r, p = cond.rates, cond.policy
    link_p, tor_p = trigger_probabilities(exposure, cond)
    from_links = float(link_p.sum()) * r.link_per_month
    from_tors = float(tor_p.sum()) * r.tor_per_month * cond.switch_factor()
    rate = from_links + from_tors
    rollback = rate * p.lost_seconds_per_interruption / 3600 * exposure.gpus
    overhead = p.overhead_share * HOURS_PER_MONTH * exposure.gpus
    # a dual-ToR NIC whose link is down keeps half its bandwidth until the repair
    degraded = 0.0 if exposure.design == "single" else \
        exposure.links * r.link_per_month * r.link_repair_hours
    inputs = {"rates": asdict(r), "policy": asdict(p), "gpu_hour_price": cond.gpu_hour_price,
              "chassis_factor": cond.chassis_factor,
              "stacked_pair_loss": cond.pair_loss(exposure.design)}
    return ReliabilityResult(
        design=exposure.design, switch=cond.switch, exposure=exposure.counts(),
        interruptions_per_month=rate, interruptions_from_links=from_links,
        interruptions_from_tors=from_tors, lost_gpu_hours_per_month=rollback + overhead,
        rollback_restart_gpu_hours_per_month=rollback, checkpoint_gpu_hours_per_month=overhead,
        cost_per_month=None if cond.gpu_hour_price is None
        else (rollback + overhead) * cond.gpu_hour_price,
        degraded_nic_hours_per_month=degraded,
        agg_failures_per_month=exposure.aggs * r.agg_per_month * cond.switch_factor(),
        uplink_failures_per_month=(exposure.uplinks + exposure.core_links) * r.uplink_per_month,
        inputs=inputs)


def compare_designs(template: str, options: dict, gpus: int, cond: Conditions,
                    designs=DESIGNS) -> list[ReliabilityResult]:
    """One result per ToR design (and per switch kind when a chassis factor is given).

    >>> cond = Conditions(FailureRates(), CheckpointPolicy(), 2.0, stacked_pair_loss=0.5)
    >>> [round(r.interruptions_per_month, 4) for r in compare_designs("hpn7", {}, 3072, cond)]
    [1.7755, 0.0122, 0.0]
    """
    from hpnsim.fabrics.registry import build_fabric

    switches = ["single-chip"] + (["chassis"] if cond.chassis_factor is not None else [])
    out = []
    for design in designs:
        exposure = job_exposure(build_fabric(template, {**options, "dual_tor": design}), gpus)
        out += [expected_reliability(exposure, replace(cond, switch=s)) for s in switches]
    return out
