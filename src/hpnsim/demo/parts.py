"""The demo's later parts: busbw by message size, linearity, a failure, a shared cluster.

Each function takes the :class:`~hpnsim.demo.pipeline.DemoConfig` (and what earlier parts
built) and returns a JSON-ready dict; :func:`hpnsim.demo.pipeline.run_demo` calls them in
order. Every number comes from the simulator.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: (fabric template, routing policy) of the busbw-by-size curves: ECMP on both fabrics and
#: HPN's own dual-plane routing on HPN (in the demo's own host generation)
SIZE_CASES = (("hpn7", "ecmp"), ("hpn7", "hpn_dual_plane"), ("dcn_plus", "ecmp"))
#: the curves repeated in every other host generation: each fabric under its own routing
OTHER_GENERATION_SIZE_CASES = (("hpn7", "hpn_dual_plane"), ("dcn_plus", "ecmp"))
#: ToR designs of the failure part: (label, ``dual_tor`` of :func:`~hpnsim.fabrics.hpn7`,
#: routing); single ToR bonds a NIC's two ports to one ToR (ECMP); HPN's non-stacked pair
#: puts port p on the ToR of plane p (dual-plane routing)
FAILURE_DESIGNS = (("single ToR", "single", "ecmp"),
                   ("non-stacked dual ToR (HPN)", "nonstacked", "hpn_dual_plane"))
#: the demo cluster: 8 hosts in 2 HPN segments, one 400G uplink per ToR (2:1 oversubscribed
#: at the ToR: 4 hosts x 200G per ToR below it), so jobs spread over both segments contend
#: on the uplinks; (name, model, tp, dp, global batch, arrival s, hosts, iterations)
CLUSTER_JOBS = (("llama3-8b", "llama3-8b", 8, 2, 2, 0.0, (0, 4), 60),
                ("bert-large a", "bert-large", 1, 16, 32, 0.5, (1, 5), 1000),
                ("llama-7b", "llama-7b", 8, 2, 2, 1.0, (2, 6), 60),
                ("bert-large b", "bert-large", 1, 16, 32, 1.5, (3, 7), 1000))
CLUSTER_FABRIC = {"segments": 2, "hosts_per_segment": 4, "backup_hosts": 0,
                  "tor_uplinks": 1, "aggs_per_plane": 1}


def bottleneck_kind(fabric, result) -> str:
    """Kind of the link with the highest bytes/capacity (``nvlink``, ``access``, ``uplink``...)."""
    from hpnsim.fabrics import LinkKind

    worst = int((result.link_bytes / fabric.link_capacity).argmax())
    return LinkKind(int(fabric.link_kind[worst])).name.lower()


def nvlink_sends(fabric, result, gpus, nccl=None) -> dict[str, Any]:
    """How many of a ring all-reduce's channels send over NVLink from the busiest GPU.

    A ring channel sends 2(n-1)/n x size / channels from every GPU to its successor; the
    successor is on the same host (an NVLink send) except at the host's exit, where the
    GPU sends through its own NIC, or, on a rail-optimized fabric, hands the bytes over
    NVLink to the GPU on the next host's rail (PXN), which is one more NVLink send. The
    count is read from the simulated NVLink bytes (as NCCL's wire: payload over the
    protocol's and NVLink's efficiencies, :class:`~hpnsim.collectives.nccl.params.NcclParams`
    defaults, as :func:`~hpnsim.collectives.run_collective` used them); ``ring_channels``
    is NCCL's default of one ring per NIC port of a host. ``None`` unless the ring ran.

    ``nccl``: the parameters the ring ran with, when not the defaults (a GPU's,
    ``NcclParams.for_gpu``).

    Examples
    --------
    >>> from hpnsim.collectives import run_collective
    >>> from hpnsim.fabrics import build_fabric
    >>> f = build_fabric("hpn7", {"gpus": 1024})
    >>> r = run_collective(f, "allreduce", range(32), 2**28, algo="ring")
    >>> nvlink_sends(f, r, range(32))
    {'nvlink_sends_per_gpu': 16.0, 'ring_channels': 16}
    """
    from hpnsim.collectives.nccl.params import NcclParams
    from hpnsim.fabrics import LinkKind

    gpus = np.asarray(gpus)
    if result.algo != "ring":
        return {"nvlink_sends_per_gpu": None, "ring_channels": None}
    nccl = nccl or NcclParams()
    host = gpus[:1] // fabric.gpus_per_host
    nics = np.unique(fabric.gpu_nic[host[0] * fabric.gpus_per_host:
                                    (host[0] + 1) * fabric.gpus_per_host])
    channels = int(nics.size * (nccl.channels_per_nic or fabric.ports_per_nic))
    out_of_gpu = (fabric.link_kind == LinkKind.NVLINK) & np.isin(fabric.link_src,
                                                                  fabric.gpu_node[gpus])
    wire = (nccl.protocol_efficiency(result.protocol) * nccl.nvlink_efficiency)
    n = gpus.size
    one_send = 2 * (n - 1) / n * result.size / channels / wire
    busiest = float(result.link_bytes[out_of_gpu].max())
    return {"nvlink_sends_per_gpu": round(busiest / one_send, 3), "ring_channels": channels}


def busbw_by_size(config, built: dict, gpus, step) -> list[dict]:
    """One row per (host GPU, fabric, routing, size): the all-reduce's nccl-tests figures
    and its busiest link's kind, each size alone on the idle fabric; ``built`` maps each
    host GPU to its fabrics (:data:`SIZE_CASES` for ``config.gpu``,
    :data:`OTHER_GENERATION_SIZE_CASES` for the other all-reduce host generations)."""
    from hpnsim.collectives import NcclParams, run_collective

    rows = []
    for gpu in dict.fromkeys((config.gpu, *config.allreduce_host_gpus)):
        cases = SIZE_CASES if gpu == config.gpu else OTHER_GENERATION_SIZE_CASES
        for template, routing in cases:
            step(f"all-reduce by size on {template}, {routing} routing, {gpu.upper()} hosts "
                 f"({len(config.sizes)} sizes)")
            for size in config.sizes:
                r = run_collective(built[gpu][template], "allreduce", gpus, float(size),
                                   algo=config.allreduce_algo, routing=routing,
                                   seed=config.seed, nccl=NcclParams.for_gpu(gpu))
                d = r.to_dict()
                d.pop("top_links", None)
                rows.append({"fabric": template, "host_gpu": gpu, **d,
                             "bottleneck_kind": bottleneck_kind(built[gpu][template], r)})
    return rows


def scaling(config, step) -> dict[str, Any]:
    """Weak scaling of the demo's model (TP and PP fixed, DP over ``config.scaling_dps``) on
    both fabrics, each under its native routing (:func:`~hpnsim.training.scaling.
    scaling_linearity`)."""
    from hpnsim.training.scaling import scaling_linearity

    step(f"scaling {config.model} over DP {', '.join(map(str, config.scaling_dps))} on "
         "hpn7 and dcn_plus")
    r = scaling_linearity(config.model, tp=config.tp, pp=config.pp, dps=config.scaling_dps,
                          fabrics=("hpn7", "dcn_plus"), gpu=config.gpu, seed=config.seed)
    return r.to_dict()


def failure(config, step) -> dict[str, Any]:
    """One access link of a small job fails and is repaired: the job's throughput through it
    with a single ToR and with HPN's non-stacked dual ToR (one HPN segment of
    ``failure_hosts`` hosts, TP 8 x DP ``failure_hosts``)."""
    from hpnsim.fabrics import hpn7
    from hpnsim.faults.events import parse_fault
    from hpnsim.faults.runner import JobPlan, simulate_with_faults
    from hpnsim.training.job import TrainJob

    hosts = config.failure_hosts
    job = TrainJob(config.failure_model, tp=8, dp=hosts, global_batch=hosts, gpu=config.gpu)
    fault = (f"link:gpu{config.failure_gpu}.port0@{config.failure_at:g}s"
             f"+{config.failure_duration:g}s")
    out = {"model": config.failure_model, "tp": 8, "dp": hosts, "gpus": 8 * hosts,
           "fault": fault, "fault_start": config.failure_at,
           "fault_duration": config.failure_duration,
           "iterations": config.failure_iterations, "designs": []}
    for label, design, routing in FAILURE_DESIGNS:
        step(f"failure: {label}, {config.failure_iterations} iterations across {fault}")
        fabric = hpn7(segments=1, hosts_per_segment=hosts, backup_hosts=0, dual_tor=design,
                      nvlink=f"{_nvlink(config) / 1e9:g}GB/s")
        plan = JobPlan(config.failure_model, job, np.arange(8 * hosts),
                       iterations=config.failure_iterations)
        [t] = simulate_with_faults(fabric, [plan], [parse_fault(fault)], routing=routing,
                                   seed=config.seed)
        d = t.to_dict()
        rates = [r["samples_per_s"] for r in t.rows]
        out["designs"].append({
            "design": label, "dual_tor": design, "routing": routing, **d,
            "finish": t.finish,
            "time_lost": t.finish - config.failure_iterations * t.nominal,
            "worst_samples_per_s": 0.0 if t.restarts or t.stalls else min(rates)})
    return out


def _nvlink(config) -> float:
    from hpnsim.workloads.gpus import get_gpu

    return get_gpu(config.gpu).nvlink_bandwidth


def cluster(config, step) -> dict[str, Any]:
    """The ``config.cluster_jobs`` (indices) of :data:`CLUSTER_JOBS` on a small HPN fabric
    (:data:`CLUSTER_FABRIC`), once with no scheduler (max-min sharing, ECMP) and once with
    Crux; iterations scaled by ``config.cluster_scale``."""
    from hpnsim.fabrics import hpn7
    from hpnsim.sched.cluster.driver import ClusterJob, simulate_cluster
    from hpnsim.training.job import TrainJob

    fabric = hpn7(**CLUSTER_FABRIC, nvlink=f"{_nvlink(config) / 1e9:g}GB/s")
    per_host = fabric.gpus_per_host
    specs = [CLUSTER_JOBS[i] for i in config.cluster_jobs]
    jobs = []
    for name, model, tp, dp, batch, arrival, hosts, iterations in specs:
        gpus = np.concatenate([np.arange(h * per_host, (h + 1) * per_host) for h in hosts])
        jobs.append(ClusterJob(name, TrainJob(model, tp=tp, dp=dp, global_batch=batch,
                                              gpu=config.gpu), arrival=arrival,
                               iterations=max(1, round(iterations * config.cluster_scale)),
                               gpus=gpus))
    out = {"fabric": {"template": "hpn7", **CLUSTER_FABRIC, "gpus": fabric.n_gpus,
                      "hosts": fabric.n_hosts},
           "jobs": [{"name": j.name, "model": spec[1], "tp": spec[2], "dp": spec[3],
                     "gpus": j.n_gpus, "arrival": j.arrival, "iterations": j.iterations,
                     "hosts": list(spec[6])} for j, spec in zip(jobs, specs, strict=True)],
           "runs": []}
    for scheduler in ("none", "crux"):
        step(f"shared cluster: {len(jobs)} jobs under scheduler {scheduler}")
        r = simulate_cluster(fabric, jobs, scheduler=scheduler, allocator="given",
                             seed=config.seed, probe_budget=config.cluster_probe_budget)
        out["runs"].append(r.to_dict())
    return out
