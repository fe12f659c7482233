"""The main job, ``hpnsim demo``: HPN 7.0 against a 3-tier Clos (DCN+), the whole system.

1. *What does a 15K-GPU pod cost?* Switches, optics, watts and dollars of both fabrics.
2. *How long does a 4 GiB all-reduce over 2,048 GPUs take, and why?* Simulated on both
   fabrics with ECMP, on HPN also with its dual-plane routing and precise path selection,
   beside ideal per-packet spraying (no hash collisions) on the same fabric, in two host
   generations with the same NICs (:data:`HOST_GPUS`): H800 hosts, whose 400 GB/s NVLink
   bounds both fabrics, and H100-class hosts (900 GB/s), where the network decides.
3. *What is the iteration time of Llama-3 70B with TP 8 x PP 8 x DP 16, and where is it
   lost?* Compute, exposed communication per dimension and pipeline bubble on both fabrics,
   and how linearly it scales as DP grows (:func:`~hpnsim.demo.parts.scaling`).
4. *How does bus bandwidth grow with message size under ECMP and HPN routing?*
   (:func:`~hpnsim.demo.parts.busbw_by_size`).
5. *What does one access-link failure cost a job?* Single ToR against HPN's non-stacked dual
   ToR (:func:`~hpnsim.demo.parts.failure`).
6. *What does Crux buy a small shared cluster?* Utilization and mean JCT with no scheduler
   and with Crux (:func:`~hpnsim.demo.parts.cluster`).
7. *What does RoCE do when queues build?* One rail's traffic on both fabrics and an N:1
   incast with a victim flow, as packets: queues, ECN marks, CNPs, DCQCN rate cuts, PFC
   pauses and head-of-line blocking (:mod:`hpnsim.demo.transport`).

Every number comes from the simulator; nothing here is hard-coded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: (fabric template, routing policy) pairs the all-reduce runs on
#: (ideal per-packet spraying is the collision-free reference on the same fabric)
ALLREDUCE_CASES = (("hpn7", "ecmp"), ("hpn7", "hpn_dual_plane"), ("hpn7", "precise"),
                   ("hpn7", "spray"), ("dcn_plus", "ecmp"), ("dcn_plus", "spray"))
#: host generations the all-reduce runs in (same NICs, 400G per GPU): H800 (NVLink 400 GB/s,
#: the HPN paper's hosts) and H100 (NVLink 900 GB/s); NVLink rates from workloads.gpus
HOST_GPUS = ("h800", "h100")
#: (fabric template, routing) run again with a forced ring beside NCCL's own choice, on the
#: fabrics' own hosts: the ring is where HPN's rail-optimized layout costs NVLink sends
#: (the cross-rail hop relayed over NVLink, PXN), which NCCL's choice hides
FORCED_RING_CASES = (("hpn7", "hpn_dual_plane"), ("dcn_plus", "ecmp"))


def fabric_gpu() -> str:
    """The GPU of the demo's hosts: the one hpn7's and dcn_plus's hosts hold
    (:mod:`hpnsim.fabrics.hosts`: H800, the HPN paper's).

    >>> fabric_gpu()
    'h800'
    """
    from hpnsim.fabrics.hosts import host_gpu

    models = {host_gpu(t).model for t in ("hpn7", "dcn_plus")}
    assert len(models) == 1, models       # the demo compares the fabrics on the same hosts
    return models.pop()


@dataclass(frozen=True)
class DemoConfig:
    """Sizes of the demo; :meth:`quick` shrinks them to a smoke run of a few seconds.

    >>> DemoConfig.quick().model
    'llama3-8b'
    """

    pod_gpus: int = 15360
    allreduce_gpus: int = 2048
    allreduce_size: float = 4 * 2**30
    #: NCCL's own choice on the hosts (NVLS on Hopper), as the HPN paper ran it; a forced
    #: ring runs beside it for :data:`FORCED_RING_CASES`
    allreduce_algo: str = "auto"
    model: str = "llama3-70b"
    #: the GPU of the fabrics' hosts (:func:`fabric_gpu`) unless set
    gpu: str = field(default_factory=fabric_gpu)
    tp: int = 8
    pp: int = 8
    dp: int = 16
    seed: int = 0
    #: message sizes of the busbw-by-size curves (1 MiB to 4 GiB, x4)
    sizes: tuple = tuple(2**20 * 4**k for k in range(7))
    #: data-parallel sizes of the scaling sweep (TP and PP as above)
    scaling_dps: tuple = (2, 4, 8, 16)
    failure_model: str = "llama3-8b"
    failure_hosts: int = 4
    failure_gpu: int = 17            # host 2, rail 1
    failure_at: float = 1.0
    failure_duration: float = 2.0
    failure_iterations: int = 12
    #: iterations of the cluster's jobs, as a share of :data:`~hpnsim.demo.parts.CLUSTER_JOBS`
    cluster_scale: float = 1.0
    #: which of :data:`~hpnsim.demo.parts.CLUSTER_JOBS` run (indices)
    cluster_jobs: tuple = (0, 1, 2, 3)
    #: the cluster's steady-state probe budget: the demo's components are small enough that
    #: probing every one task by task (the more faithful level) costs seconds
    #: (docs/cluster.md, phase-level probes)
    cluster_probe_budget: int = 5_000_000
    #: GPU models of the all-reduce's host generations (their NVLink; the NICs stay)
    allreduce_host_gpus: tuple = HOST_GPUS
    #: the transport and incast part as packets (:mod:`hpnsim.demo.transport`); ``quick``
    #: skips it (and says so)
    packet: bool = True
    #: hosts of the rail's traffic (half per segment) and bytes each NIC sends
    packet_rail_hosts: int = 16
    packet_rail_bytes: float = 8 * 2**20
    #: senders of the N:1 incast and bytes each sends: enough that the incast outgrows what
    #: the default 151 MiB shared buffer absorbs before an ingress port reaches XOFF (a
    #: lossless ingress pauses at 1/8 of the free buffer: 4 MiB a sender, a 28 MB queue, never
    #: paused; 16 MiB a sender queues 61 MB and pauses two hops upstream)
    incast_senders: int = 8
    incast_bytes: float = 16 * 2**20
    #: write each figure as SVG beside its PNG
    svg: bool = True

    @classmethod
    def quick(cls) -> DemoConfig:
        return cls(pod_gpus=2048, allreduce_gpus=2048, allreduce_size=2**28,
                   model="llama3-8b", tp=8, pp=2, dp=4, sizes=(2**20, 2**24, 2**28),
                   scaling_dps=(1, 2), failure_duration=1.0, failure_iterations=8,
                   cluster_scale=0.25, cluster_jobs=(1, 2), packet=False, svg=False)


#: the columns of :meth:`DemoResult.rows`
ROW_COLUMNS = ("fabric", "case", "routing", "host_gpu", "time", "algbw", "busbw",
               "bottleneck_kind", "hash_collisions", "compute", "exposed_tp", "exposed_pp",
               "exposed_dp", "exposed_ep", "bubble", "optimizer", "straggler", "mfu",
               "tokens_per_second")
#: the columns of :meth:`DemoResult.fabric_rows`
FABRIC_COLUMNS = ("fabric", "gpus", "hosts", "tor", "agg", "core", "links", "cables",
                  "network_cost_usd", "network_cost_per_gpu_usd", "network_power_w",
                  "gpus_per_mw")


@dataclass
class DemoResult:
    """What the demo found: one section per question, each JSON-ready.

    ``fabrics`` holds each fabric's report (:func:`~hpnsim.fabrics.analysis.fabric_report`),
    ``allreduce`` one dict per (host generation, fabric, routing) case (the fields of
    :meth:`~hpnsim.collectives.CollectiveResult.to_dict`, bandwidths in GB/s,
    ``bottleneck_kind``, ``host_gpu`` and ``nvlink_bandwidth`` of the hosts, and the ring's
    NVLink sends per GPU, :func:`~hpnsim.demo.parts.nvlink_sends`), ``training`` one dict
    per fabric (the fields of :meth:`~hpnsim.training.IterationResult.to_dict` without the
    timeline),
    ``busbw_by_size`` one row per (fabric, routing, size), ``scaling`` a
    :meth:`~hpnsim.training.scaling.ScalingResult.to_dict`, ``failure`` the job through the
    fault per ToR design and ``cluster`` the shared cluster per scheduler (see
    :mod:`hpnsim.demo.parts`); ``transport`` and ``incast`` the packet runs (see
    :mod:`hpnsim.demo.transport`; empty when ``packet`` is off).
    """

    config: dict[str, Any]
    fabrics: list[dict[str, Any]] = field(default_factory=list)
    allreduce: list[dict[str, Any]] = field(default_factory=list)
    training: list[dict[str, Any]] = field(default_factory=list)
    busbw_by_size: list[dict[str, Any]] = field(default_factory=list)
    scaling: dict[str, Any] = field(default_factory=dict)
    failure: dict[str, Any] = field(default_factory=dict)
    cluster: dict[str, Any] = field(default_factory=dict)
    transport: dict[str, Any] = field(default_factory=dict)
    incast: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The sections as they are (JSON-ready; ``hpnsim demo --json`` prints it)."""
        return dict(self.__dict__)

    def rows(self) -> list[dict[str, Any]]:
        """One row per (fabric, case) simulated: each all-reduce (``case`` ``"allreduce"``,
        one per host generation and routing) and each training iteration (``case``
        ``"iteration"``); ``host_gpu`` is the GPU model of the hosts.

        ``time`` is the all-reduce's time or the iteration time (seconds); ``algbw`` and
        ``busbw`` (GB/s, as in :attr:`allreduce`), ``bottleneck_kind`` and
        ``hash_collisions`` belong to all-reduce rows; the iteration's parts (``compute``,
        ``exposed_<dim>``, ``bubble``, ``optimizer``: GPU averages, seconds), ``mfu`` and
        ``tokens_per_second`` to iteration rows; a row has ``None`` where a column is not its
        case's.

        Examples
        --------
        >>> r = DemoResult({}, allreduce=[{"fabric": "hpn7", "routing": "ecmp", "time": 2e-3,
        ...                                "algbw": 50.0, "busbw": 99.0, "hash_collisions": 3,
        ...                                "bottleneck_kind": "uplink"}])
        >>> [(row["fabric"], row["case"], row["routing"], row["busbw"]) for row in r.rows()]
        [('hpn7', 'allreduce', 'ecmp', 99.0)]
        """
        out = []
        for a in self.allreduce:
            row = dict.fromkeys(ROW_COLUMNS)
            row.update({"fabric": a["fabric"], "case": "allreduce", "routing": a["routing"],
                        "host_gpu": a.get("host_gpu"), "time": a["time"],
                        "algbw": a["algbw"], "busbw": a["busbw"],
                        "bottleneck_kind": a["bottleneck_kind"],
                        "hash_collisions": a["hash_collisions"]})
            out.append(row)
        for t in self.training:
            row = dict.fromkeys(ROW_COLUMNS)
            row.update({"fabric": t["fabric"], "case": "iteration",
                        "host_gpu": self.config.get("gpu"), "time": t["iteration_time"],
                        "compute": t["compute_time"],
                        **{f"exposed_{dim}": t["exposed_comm"].get(dim, 0.0)
                           for dim in ("tp", "pp", "dp", "ep")},
                        "bubble": t["bubble"], "optimizer": t["optimizer_time"],
                        "straggler": t.get("straggler_time", 0.0),
                        "mfu": t["mfu"], "tokens_per_second": t["tokens_per_second"]})
            out.append(row)
        return out

    def fabric_rows(self) -> list[dict[str, Any]]:
        """One row per fabric: its size, switches per tier, links, cables, network cost
        (USD, and per GPU) and power (W) from :attr:`fabrics`.

        >>> DemoResult({}).fabric_rows()
        []
        """
        return [{"fabric": f["template"], "gpus": f["gpus"], "hosts": f["hosts"],
                 **{tier: f["switches"].get(tier, 0) for tier in ("tor", "agg", "core")},
                 "links": f["links"], "cables": f["cables"],
                 "network_cost_usd": f["bom"]["cost_usd"]["network"],
                 "network_cost_per_gpu_usd": f["bom"]["network_cost_per_gpu_usd"],
                 "network_power_w": f["bom"]["power_w"]["network"],
                 "gpus_per_mw": f["bom"]["gpus_per_mw"]}
                for f in self.fabrics]

    def to_frame(self):
        """:meth:`rows` as a pandas DataFrame (pandas: the optional ``frames`` extra)."""
        from hpnsim.frames import to_frame

        return to_frame(self.rows(), columns=list(ROW_COLUMNS))


def _spread_over_segments(fabric, n_gpus: int):
    """The first ``n_gpus`` GPUs: whole hosts, filling segments in order (a job placed by a
    segment-aware scheduler)."""
    import numpy as np

    if n_gpus > fabric.n_gpus:
        from hpnsim.errors import InputError

        raise InputError("gpus", f"the job needs {n_gpus} GPUs, the fabric has {fabric.n_gpus}")
    return np.arange(n_gpus)


def _host_bandwidths(fabric) -> dict[str, float]:
    """NVLink per GPU (both directions, as GPU sheets quote it) and NIC bandwidth per GPU (one
    direction, all ports), in bytes/s: what a figure must name as held fixed."""
    from hpnsim.fabrics import LinkKind

    nvlink = fabric.link_capacity[fabric.link_kind == LinkKind.NVLINK]
    nic_out = (fabric.link_src == fabric.gpu_nic[0]) & (fabric.link_kind == LinkKind.ACCESS)
    return {"nvlink_bandwidth": 2 * float(nvlink.max()) if nvlink.size else 0.0,
            "nic_bandwidth": float(fabric.link_capacity[nic_out].sum())}


def run_demo(config: DemoConfig = DemoConfig(),
             step: Callable[[str], None] = lambda message: None) -> DemoResult:
    """Run every part; ``step`` is told what is being computed next (for progress).

    Examples
    --------
    >>> r = run_demo(DemoConfig(pod_gpus=1024, allreduce_gpus=64, allreduce_size=2**20,
    ...                         model="llama3-8b", tp=8, pp=1, dp=2, sizes=(2**20,),
    ...                         scaling_dps=(1, 2), failure_iterations=4,
    ...                         failure_duration=0.5, failure_at=0.2, cluster_scale=0.02))
    >>> [f["template"] for f in r.fabrics]
    ['hpn7', 'dcn_plus']
    >>> sorted({a["routing"] for a in r.allreduce})
    ['ecmp', 'hpn_dual_plane', 'precise', 'spray']
    >>> sorted({a["host_gpu"] for a in r.allreduce})
    ['h100', 'h800']
    >>> [d["dual_tor"] for d in r.failure["designs"]], [c["scheduler"] for c in r.cluster["runs"]]
    (['single', 'nonstacked'], ['none', 'crux'])
    """
    from hpnsim.collectives import NcclParams, run_collective
    from hpnsim.demo import parts
    from hpnsim.fabrics import build_fabric
    from hpnsim.fabrics.analysis import fabric_report
    from hpnsim.fabrics.hosts import gpu_choice
    from hpnsim.training import TrainJob, simulate_iteration
    from hpnsim.workloads.gpus import get_gpu

    result = DemoResult(config=dict(config.__dict__))
    result.config["gpu_from"] = gpu_choice("hpn7", None if config.gpu == fabric_gpu()
                                           else config.gpu, by="DemoConfig.gpu")[1]
    built: dict[str, dict] = {}   # host GPU -> template -> fabric
    for gpu in dict.fromkeys((config.gpu, *config.allreduce_host_gpus)):
        nvlink = f"{get_gpu(gpu).nvlink_bandwidth / 1e9:g}GB/s"   # the hosts' NVLink
        built[gpu] = {}
        for template in ("hpn7", "dcn_plus"):
            step(f"building {template} for {config.pod_gpus:,} GPUs ({gpu.upper()} hosts, "
                 f"NVLink {nvlink})")
            built[gpu][template] = build_fabric(template, {"gpus": config.pod_gpus,
                                                           "nvlink": nvlink})
            if gpu == config.gpu:
                result.fabrics.append(fabric_report(built[gpu][template]))
    result.config["hosts"] = {t: _host_bandwidths(f) for t, f in built[config.gpu].items()}
    result.config["host_generations"] = {
        gpu: _host_bandwidths(built[gpu]["hpn7"]) for gpu in config.allreduce_host_gpus}

    gpus = _spread_over_segments(built[config.gpu]["hpn7"], config.allreduce_gpus)
    for gpu in config.allreduce_host_gpus:
        for template, routing in ALLREDUCE_CASES:
            step(f"all-reduce on {template} with {routing} routing, {gpu.upper()} hosts")
            fabric = built[gpu][template]
            forced = ["ring"] if (gpu == config.gpu and (template, routing)
                                  in FORCED_RING_CASES and config.allreduce_algo != "ring") \
                else []
            for algo in (config.allreduce_algo, *forced):
                if algo != config.allreduce_algo:
                    step(f"all-reduce on {template} with {routing} routing, {gpu.upper()} "
                         f"hosts, ring forced")
                r = run_collective(fabric, "allreduce", gpus, config.allreduce_size,
                                   algo=algo, routing=routing, seed=config.seed,
                                   nccl=NcclParams.for_gpu(gpu))
                result.allreduce.append({
                    "fabric": template, "host_gpu": gpu, **r.to_dict(),
                    "forced_algo": algo if algo != config.allreduce_algo else None,
                    "nvlink_bandwidth": _host_bandwidths(fabric)["nvlink_bandwidth"],
                    "bottleneck_kind": parts.bottleneck_kind(fabric, r),
                    **parts.nvlink_sends(fabric, r, gpus, NcclParams.for_gpu(gpu))})
    result.busbw_by_size = parts.busbw_by_size(config, built, gpus, step)

    job = TrainJob(config.model, tp=config.tp, pp=config.pp, dp=config.dp, gpu=config.gpu)
    for template in ("hpn7", "dcn_plus"):
        step(f"one {config.model} iteration on {template}")
        fabric = built[config.gpu][template]
        r = simulate_iteration(job, fabric, seed=config.seed)
        result.training.append({"fabric": template, **r.to_dict(timeline=False)})
    del built
    result.scaling = parts.scaling(config, step)
    result.failure = parts.failure(config, step)
    result.cluster = parts.cluster(config, step)
    if config.packet:
        from hpnsim.demo import transport

        result.transport = transport.rail_traffic(config, step)
        result.incast = transport.incast(config, step)
    return result
