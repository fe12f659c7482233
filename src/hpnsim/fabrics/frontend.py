"""HPN's frontend network: a separate 3-tier, 1:1 Clos for hosts' CPUs and storage.

HPN gives every host a 9th NIC (2 x 200G) on a network of its own, apart from the training
(backend) fabric: management, dataset and image loading, checkpoints and inference run there,
and the storage hosts (CPFS/OSS) sit in it. It is a plain 3-tier Clos with non-stacked dual
ToRs and no oversubscription (hpn.md, "Host" and "Frontend network").

Model (every frontend node has ``node_network == FRONTEND``; nodes and links come after the
backend's, so backend node and link ids are the same with or without a frontend):

- ``HOST`` node per active host: the CPU side. Each GPU reaches it over one PCIe link
  (``pcie``, Gen5 x16 by default), the host's frontend NIC hangs off it over another. A GPU
  and its backend NIC share a PCIe switch in a real server; that sharing is not modelled.
- The frontend NIC has two ports of ``frontend_port_speed``: port 0 to ToR side 0, port 1 to
  ToR side 1 of its frontend ToR pair (non-stacked: no link between the two ToRs).
- Frontend ToR pairs are segment-aligned: host ``j`` of a segment uses pair
  ``j // frontend_hosts_per_tor``. Default 64 hosts per pair: a 51.2T ToR cannot be 1:1 with
  128 hosts + backups (136 x 200G + 68 x 400G > 51.2T), so a 128-host segment takes 2 pairs.
  The segment's backup hosts take reserved ToR ports, spread over its pairs.
- ToR uplinks: enough for 1:1 (``hosts_per_tor x port / uplink``: 32 x 400G), one to each of
  the ``frontend_aggs_per_pod`` Aggs of its frontend pod (default one Agg per uplink).
  Frontend pod ``p < pods`` serves backend pod ``p``; storage pods follow.
- Aggs have as many uplinks as downlinks (1:1). Agg ``j`` of every frontend pod sends uplink
  ``u`` to core ``u * groups + j // per_pod`` with ``per_pod = min(aggs, core_ports // pods)``
  Aggs of one pod on a core, as in the backend core.
- ``STORAGE`` nodes, one per storage host (server and NIC together), each with two ports
  like a host NIC, fill storage ToR pairs of ``frontend_hosts_per_tor`` in storage pods as
  large as a compute frontend pod.

Default storage size, from the checkpoint facts (about 30 GB per GPU written in about
100 s): every GPU of the fabric checkpointing at once needs ``n_gpus x 30 GB / 100 s``;
a storage host takes ``2 x 200G = 50 GB/s``, so ``ceil(n_gpus x 0.3 GB/s / 50 GB/s)``
storage hosts: 93 for a 15,360-GPU pod (4.608 TB/s; 93 x 50 GB/s = 4.65 TB/s, a 99.1 s
checkpoint) and 787 for 131,072 GPUs. :func:`checkpoint_time_bound` checks every cut.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from hpnsim.errors import InputError
from hpnsim.fabrics.assembly import Assembly, check_ports, positive_int, tier_plan
from hpnsim.fabrics.fabric import FRONTEND, Fabric, LinkKind, NodeKind
from hpnsim.units import parse_bandwidth

#: checkpoint facts (hpn.md): bytes per GPU and the time a checkpoint should take
CHECKPOINT_BYTES_PER_GPU = 30e9
CHECKPOINT_SECONDS = 100.0
FRONTEND_PORTS = 2  # per frontend NIC and per storage host: one to each ToR of its pair


def default_storage_hosts(n_gpus: int, port_speed: float = 25e9,
                          bytes_per_gpu: float = CHECKPOINT_BYTES_PER_GPU,
                          seconds: float = CHECKPOINT_SECONDS) -> int:
    """Storage hosts whose NICs absorb a checkpoint of every GPU within ``seconds``.

    >>> default_storage_hosts(15360), default_storage_hosts(131072)
    (93, 787)
    """
    demand = n_gpus * bytes_per_gpu / seconds
    return max(1, math.ceil(demand / (FRONTEND_PORTS * port_speed) - 1e-9))


@dataclass
class FrontendSpec:
    """Frontend parameters as given to :func:`hpnsim.fabrics.hpn7` (None: derived default)."""

    hosts_per_tor: int = 64
    port_speed: str = "200G"
    tor_uplinks: int | None = None
    aggs_per_pod: int | None = None
    agg_uplinks: int | None = None
    storage_hosts: int | None = None
    core_ports: int | None = None


@dataclass
class _Plan:
    hosts_per_tor: int
    port: float
    up: float
    chip: float
    pairs_per_segment: int
    backup_ports: int
    tor_uplinks: int
    aggs: int
    per_link: int
    agg_down: int
    agg_uplinks: int
    storage: int
    storage_pairs: int
    storage_pods: int
    core_ports: int


def _plan(spec: FrontendSpec, *, n_gpus: int, segments: int, hosts: int, backups: int,
          up: float, chip: float) -> _Plan:
    hpt = positive_int(spec.hosts_per_tor, "frontend_hosts_per_tor")
    port = parse_bandwidth(spec.port_speed, "frontend_port_speed")
    pairs = -(-hosts // hpt)
    active = min(hpt, hosts)
    backup_ports = -(-backups // pairs)
    if spec.tor_uplinks is None:
        tor_up = max(1, math.ceil(active * port / up - 1e-9))
    else:
        tor_up = positive_int(spec.tor_uplinks, "frontend_tor_uplinks")
    aggs = tor_up if spec.aggs_per_pod is None else positive_int(spec.aggs_per_pod,
                                                                 "frontend_aggs_per_pod")
    if tor_up % aggs:
        raise InputError("frontend_tor_uplinks", f"must be a multiple of frontend_aggs_per_pod"
                                                 f"={aggs}, got {tor_up}")
    check_ports("frontend ToR", "frontend_hosts_per_tor", chip, down=(active, port),
                backup=(backup_ports, port), up=(tor_up, up))
    per_link = tor_up // aggs
    pairs_per_pod = segments * pairs
    agg_down = 2 * pairs_per_pod * per_link
    agg_up = agg_down if spec.agg_uplinks is None else positive_int(spec.agg_uplinks,
                                                                    "frontend_agg_uplinks")
    check_ports("frontend Agg", "segments", chip, down=(agg_down, up), up=(agg_up, up))
    storage = (default_storage_hosts(n_gpus, port) if spec.storage_hosts is None
               else positive_int(spec.storage_hosts, "storage_hosts"))
    storage_pairs = -(-storage // hpt)
    core_ports = int(chip // up) if spec.core_ports is None else positive_int(
        spec.core_ports, "frontend_core_ports")
    check_ports("frontend core", "frontend_core_ports", chip, down=(core_ports, up))
    return _Plan(hpt, port, up, chip, pairs, backup_ports, tor_up, aggs, per_link, agg_down,
                 agg_up, storage, storage_pairs, -(-storage_pairs // pairs_per_pod), core_ports)


def add_frontend(asm: Assembly, spec: FrontendSpec, gpu: np.ndarray, *, gpus_per_host: int,
                 pods: int, segments: int, n_segments: int, hosts: int, backups: int,
                 up: float, chip: float, pcie: float, hop_latency: float,
                 host_latency: float) -> dict[str, Any]:
    """Add hosts' CPUs, frontend NICs, the frontend Clos and storage; return its meta.

    ``gpu`` are the backend GPU node ids (host-major, ``hosts`` hosts per segment, segments
    numbered pod-major). The returned dict goes to ``fabric.meta["frontend"]``;
    :func:`hpnsim.fabrics.hpn7` calls it when ``frontend=True``.

    >>> from hpnsim.fabrics import hpn7
    >>> fe = hpn7(segments=2, frontend=True).meta["frontend"]
    >>> fe["pairs_per_segment"], fe["storage_hosts"], fe["tiers"]["tor"]["up_ports"]
    (2, 13, 32)
    """
    p = _plan(spec, n_gpus=len(gpu), segments=segments, hosts=hosts, backups=backups, up=up,
              chip=chip)
    n_hosts = n_segments * hosts
    h = np.arange(n_hosts, dtype=np.int32)
    seg = h // hosts
    host_pod, host_seg = seg // segments, seg % segments
    net = {"network": FRONTEND}
    host = asm.nodes(NodeKind.HOST, n_hosts, tier=0, pod=host_pod, segment=host_seg, host=h,
                     **net)
    nic = asm.nodes(NodeKind.NIC, n_hosts, tier=0, pod=host_pod, segment=host_seg, host=h,
                    **net)
    asm.cables(gpu, np.repeat(host, gpus_per_host), pcie, host_latency, LinkKind.PCIE)
    asm.cables(host, nic, pcie, host_latency, LinkKind.PCIE)

    # ToRs: compute pairs ordered (segment, pair, side), then storage pairs (pair, side)
    n_pairs = n_segments * p.pairs_per_segment + p.storage_pairs
    t = np.arange(2 * n_pairs, dtype=np.int32)
    pair, side = t // 2, t % 2
    compute = pair < n_segments * p.pairs_per_segment
    storage_pair = pair - n_segments * p.pairs_per_segment
    pairs_per_pod = segments * p.pairs_per_segment
    tor_pod = np.where(compute, pair // p.pairs_per_segment // segments,
                       pods + storage_pair // pairs_per_pod)
    tor_seg = np.where(compute, pair // p.pairs_per_segment % segments, -1)
    tor_index = np.where(compute, pair % p.pairs_per_segment, storage_pair % pairs_per_pod)
    tor = asm.nodes(NodeKind.TOR, len(t), tier=1, pod=tor_pod, segment=tor_seg, plane=side,
                    index=tor_index, **net)
    host_pair = seg * p.pairs_per_segment + (h % hosts) // p.hosts_per_tor
    for s in (0, 1):
        asm.cables(nic, tor[2 * host_pair + s], p.port, hop_latency, LinkKind.ACCESS, port=s)
    k = np.arange(p.storage, dtype=np.int32)
    s_pair = k // p.hosts_per_tor
    store = asm.nodes(NodeKind.STORAGE, p.storage, tier=0, pod=pods + s_pair // pairs_per_pod,
                      index=k, **net)
    first_storage_tor = 2 * n_segments * p.pairs_per_segment
    for s in (0, 1):
        asm.cables(store, tor[first_storage_tor + 2 * s_pair + s], p.port, hop_latency,
                   LinkKind.ACCESS, port=s)

    # Aggs ordered (frontend pod, index); each ToR spreads its uplinks over its pod's Aggs
    fe_pods = pods + p.storage_pods
    a = np.arange(fe_pods * p.aggs, dtype=np.int32)
    agg = asm.nodes(NodeKind.AGG, len(a), tier=2, pod=a // p.aggs, index=a % p.aggs, **net)
    slots = np.arange(p.tor_uplinks, dtype=np.int32) // p.per_link
    asm.cables(np.repeat(tor, p.tor_uplinks), (agg[0] + tor_pod[:, None] * p.aggs
                                               + slots).ravel(), up, hop_latency,
               LinkKind.UPLINK)

    per_pod = min(p.aggs, p.core_ports // fe_pods)
    if per_pod == 0:
        raise InputError("storage_hosts", f"the frontend needs {fe_pods} pods ({pods} compute "
                                          f"+ {p.storage_pods} storage) but a "
                                          f"{p.core_ports}-port core reaches at most "
                                          f"{p.core_ports}")
    groups = -(-p.aggs // per_pod)
    n_core = p.agg_uplinks * groups
    core = asm.nodes(NodeKind.CORE, n_core, tier=3, index=np.arange(n_core), **net)
    uplink = np.arange(p.agg_uplinks, dtype=np.int32)
    target = core[0] + uplink * groups + (a % p.aggs // per_pod)[:, None]
    asm.cables(np.repeat(agg, p.agg_uplinks), target.ravel(), up, hop_latency, LinkKind.CORE)

    n_tor, n_agg = len(t), len(a)
    tiers = {
        "tor": dict(tier_plan(n_tor, chip, down=(min(p.hosts_per_tor, hosts), p.port),
                              backup=(p.backup_ports, p.port), up=(p.tor_uplinks, up)),
                    total_down_ports=FRONTEND_PORTS * (n_hosts + p.storage),
                    total_backup_ports=FRONTEND_PORTS * n_segments * backups),
        "agg": dict(tier_plan(n_agg, chip, down=(p.agg_down, up), up=(p.agg_uplinks, up)),
                    total_down_ports=n_tor * p.tor_uplinks),
        "core": dict(tier_plan(n_core, chip, down=(fe_pods * per_pod, up)),
                     total_down_ports=n_agg * p.agg_uplinks),
    }
    return {"hosts": n_hosts, "storage_hosts": p.storage, "storage_pods": p.storage_pods,
            "pods": fe_pods, "hosts_per_tor": p.hosts_per_tor,
            "pairs_per_segment": p.pairs_per_segment, "aggs_per_pod": p.aggs,
            "port_speed": p.port, "nic_bandwidth": FRONTEND_PORTS * p.port,
            "pcie": pcie, "tiers": tiers}


def checkpoint_time_bound(fabric: Fabric, bytes_per_gpu: float = CHECKPOINT_BYTES_PER_GPU
                          ) -> dict[str, float]:
    """Seconds a checkpoint of every GPU needs at least, per frontend cut, and the worst.

    Cuts: one GPU's PCIe link to its CPU, one host's frontend NIC, the storage hosts' NICs,
    and the Agg-to-core links of the compute pods (out) and of the storage pods (in).

    >>> from hpnsim.fabrics import hpn7
    >>> b = checkpoint_time_bound(hpn7(frontend=True))
    >>> b["bottleneck"], round(b["seconds"], 1)
    ('storage_nics', 99.1)
    """
    fe = fabric.meta.get("frontend")
    if not fe:
        raise InputError("frontend", "the fabric has no frontend network; build it with "
                                     "frontend=True")
    tiers = fe["tiers"]
    agg = tiers["agg"]
    per_pod_up = fe["aggs_per_pod"] * agg["up_ports"] * agg["up_speed"]
    gpus_per_pod = (fabric.meta["segments"] * fabric.meta["hosts_per_segment"]
                    * fabric.gpus_per_host)
    total = fabric.n_gpus * bytes_per_gpu
    cuts = {
        "gpu_pcie": bytes_per_gpu / fe["pcie"],
        "host_nic": fabric.gpus_per_host * bytes_per_gpu / fe["nic_bandwidth"],
        "storage_nics": total / (fe["storage_hosts"] * fe["nic_bandwidth"]),
        "compute_pod_uplinks": min(gpus_per_pod, fabric.n_gpus) * bytes_per_gpu / per_pod_up,
        "storage_pod_uplinks": total / (fe["storage_pods"] * per_pod_up),
    }
    worst = max(cuts, key=cuts.get)
    return {**cuts, "bottleneck": worst, "seconds": cuts[worst]}
