"""The demo's transport and incast part: what RoCE does when queues build, as packets.

Two runs of the packet engine (:mod:`hpnsim.packet`, docs/packet.md) with its default RoCE
parameters (ConnectX DCQCN, SimAI's 400G ECN thresholds, PFC; ``PacketParams()``), none
tuned:

* :func:`rail_traffic`: one rail's traffic (rail 0 of ``packet_rail_hosts`` hosts, half
  in each of two segments, a ring whose every hop crosses segments, one QP per NIC port as
  NCCL runs a channel per port) on DCN+ under ECMP and on HPN 7.0 under its dual-plane
  routing, the same hosts, NICs and bytes. Where the hash puts two QPs on one link, its
  queue builds: the ECN marks, CNPs, DCQCN rate cuts and PFC pauses it draws are counted
  per port. The hosts are H100 class (NVLink 900 GB/s): only NIC-to-NIC legs run here, and
  on the fabric's own H800 hosts the ring would wait for NVLink, which hides the network.
* :func:`incast`: ``incast_senders`` GPUs of one segment send at once to one GPU of the
  other (port 0, one plane), with and without DCQCN (PFC on), and lossy (PFC off, go-back-N
  recovers the drops). A victim flow between two other hosts shares an Agg with the incast
  but no bottleneck (no link it crosses is offered more than its capacity): PFC pauses
  spreading upstream from the receiver's ToR stop it too (head-of-line blocking).

Every figure is the packet run's own counter; :mod:`hpnsim.report.packet` turns them into
the takeaway lines and the report's figures and tables.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: the packet part's hosts: H100 class, so the network, not NVLink, decides (workloads.gpus)
PACKET_HOST_GPU = "h100"
#: (fabric template, builder options, routing) of the rail's traffic: two segments each,
#: one ToR (pair) uplink per Agg, 8 Aggs per pod (DCN+) or per plane (HPN)
RAIL_FABRICS = (
    ("dcn_plus", {"segments": 2, "tor_uplinks": 8, "aggs_per_pod": 8}, "ecmp"),
    ("hpn7", {"segments": 2, "backup_hosts": 0, "tor_uplinks": 8, "aggs_per_plane": 8},
     "hpn_dual_plane"),
)
#: most ports per fabric in the per-port table, and queues drawn per figure
TOP_PORTS, DRAWN_PORTS = 6, 3
#: the incast's cases: (label, congestion control, PFC)
INCAST_CASES = (("PFC, no DCQCN", False, True), ("PFC + DCQCN", True, True),
                ("no PFC (lossy), DCQCN", True, False))


def _nvlink() -> str:
    from hpnsim.workloads.gpus import get_gpu

    return f"{get_gpu(PACKET_HOST_GPU).nvlink_bandwidth / 1e9:g}GB/s"


def _wire(params) -> float:
    """Wire bytes per payload byte (headers, preamble and gap)."""
    return (params.mtu_bytes + params.header_bytes + params.framing_bytes) / params.mtu_bytes


def _switch_egress(fabric) -> np.ndarray:
    from hpnsim.packet.adapter import fabric_links

    return np.asarray(fabric_links(fabric)["switch_of"]) >= 0


def _port_rows(fabric, r, links) -> list[dict[str, Any]]:
    """The switch ports among ``links`` with the fullest queues (or any mark or pause)."""
    links = np.asarray(sorted(set(int(k) for k in links)), dtype=np.int64)
    links = links[(r.q_max[links] > 0) | (r.marks[links] > 0) | (r.pauses[links] > 0)]
    order = links[np.lexsort((links, -r.q_max[links]))][:TOP_PORTS]
    return [{"port": fabric.link_name(int(k)), "link": int(k), "q_max": float(r.q_max[k]),
             "q_mean": float(r.q_mean[k]), "marks": int(r.marks[k]),
             "pauses": int(r.pauses[k]), "paused_time": float(r.paused_time[k])}
            for k in order]


def _counters(r) -> dict[str, Any]:
    """A run's totals: ECN marks, CNPs, the QPs DCQCN cut (a CNP that reaches a QP cuts its
    rate, so a QP with one is cut at least once), PFC pauses and time paused, drops."""
    return {"ecn_marks": int(r.marks.sum()), "cnps": int(r.cnps.sum()),
            "qps_cut": int((r.cnps > 0).sum()), "pfc_pauses": int(r.pauses.sum()),
            "paused_time": float(r.paused_time.sum()), "drops": int(r.drops.sum()),
            "rewinds": int(r.rewinds.sum()), "events": int(r.events)}


def _queue(r, fabric, watched: list[int], keep: list[int]) -> dict[str, Any]:
    """The sampled queues of ``keep`` (links among ``watched``), in KB-ready bytes."""
    cols = [watched.index(k) for k in keep]
    return {"ports": [fabric.link_name(k) for k in keep],
            "time": r.sample_times.tolist(),
            "bytes": [r.samples[:, c].tolist() for c in cols]}


def rail_traffic(config, step) -> dict[str, Any]:
    """One rail's traffic on DCN+ under ECMP and on HPN under dual-plane routing, as packets
    (the module docstring); per fabric its time against the NICs' line rate, the counters
    and the fullest ports, with their queues over time."""
    from hpnsim.fabrics import build_fabric
    from hpnsim.packet import PacketParams, simulate_paths
    from hpnsim.packet.adapter import network_legs
    from hpnsim.routing import route

    params = PacketParams()
    hosts = config.packet_rail_hosts
    out = {"hosts": hosts, "gpu": PACKET_HOST_GPU, "nvlink": _nvlink(),
           "bytes_per_nic": config.packet_rail_bytes, "params": "defaults (connectx)",
           "fabrics": []}
    for template, options, routing in RAIL_FABRICS:
        step(f"transport: rail 0 of {hosts} hosts on {template} as packets ({routing})")
        fabric = build_fabric(template, {**options, "hosts_per_segment": hosts // 2,
                                         "nvlink": _nvlink()})
        g, ports = fabric.gpus_per_host, fabric.ports_per_nic
        half = hosts // 2
        ring = np.ravel(np.column_stack([np.arange(half), np.arange(half) + half]))
        src = np.repeat(ring * g, ports)
        dst = np.repeat(np.roll(ring, -1) * g, ports)
        paths = route(fabric, src, dst, routing, seed=config.seed,
                      conn=np.arange(src.size))
        legs = network_legs(fabric, paths)
        crossed = np.unique(np.concatenate(legs))
        watched = [int(k) for k in crossed[_switch_egress(fabric)[crossed]]]
        size = config.packet_rail_bytes / ports
        port_rate = float(fabric.link_capacity[fabric.gpu_access_link[0, 0]])
        ideal = size * _wire(params) / port_rate
        r = simulate_paths(fabric, paths, size, params=params, watch=watched,
                           sample_interval=max(ideal / 400, 1e-7), max_samples=4000)
        rows = _port_rows(fabric, r, watched)
        out["fabrics"].append({
            "fabric": template, "routing": routing, "flows": int(src.size),
            "time": float(r.makespan), "ideal": ideal, **_counters(r), "ports": rows,
            "queue": _queue(r, fabric, watched, [p["link"] for p in rows[:DRAWN_PORTS]])})
    return out


def _incast_setup(fabric, senders: int, seed: int):
    """Senders (rail 0 of segment 1's first hosts), receiver (rail 0 of host 0), and the
    first victim (a later host of segment 1 to another host of segment 0, port 0) whose
    path shares an Agg->ToR link with the incast; all on port 0 (one plane)."""
    from hpnsim.errors import InputError
    from hpnsim.routing import route

    g, per_segment = fabric.gpus_per_host, fabric.n_hosts // 2
    src = (per_segment + np.arange(senders)) * g
    base = route(fabric, src, np.zeros(senders, dtype=np.int64), "hpn_dual_plane", port=0,
                 seed=seed)
    used = set(base.links.tolist())
    tier = np.asarray(fabric.node_tier)
    for vs in range(per_segment + senders, 2 * per_segment):
        for vd in range(1, per_segment):
            p = route(fabric, [vs * g], [vd * g], "hpn_dual_plane", port=0, seed=seed)
            shared = [int(k) for k in p.links if int(k) in used
                      and tier[fabric.link_src[k]] == 2 and tier[fabric.link_dst[k]] == 1]
            if shared:
                return src, vs * g, vd * g, shared
    raise InputError("incast_senders", "no victim path shares an Agg with the incast; "
                                       "use fewer senders")


def _upstream(fabric, r, incast_port: int) -> list[dict[str, Any]]:
    """The links PFC paused, by how many hops upstream of the incast port their far end
    is (1: the links into the receiver's ToR, 2: the links into the Aggs feeding it...)."""
    tier = np.asarray(fabric.node_tier)
    levels: dict[int, list[int]] = {}
    for k in np.flatnonzero(r.pauses):
        far = fabric.link_dst[k]                   # the switch that paused the link
        if far == fabric.link_src[incast_port]:
            hops = 1                               # into the receiver's ToR
        elif tier[far] == 2:
            hops = 2                               # into an Agg that feeds it
        else:
            hops = 3                               # into the senders' ToR
        levels.setdefault(hops, []).append(int(k))
    return [{"hops": h, "links": len(ks), "pauses": int(r.pauses[ks].sum()),
             "paused_time": float(r.paused_time[ks].sum()),
             "example": fabric.link_name(ks[0])} for h, ks in sorted(levels.items())]


def incast(config, step) -> dict[str, Any]:
    """An N:1 incast across two HPN segments with and without DCQCN (PFC on), and lossy,
    with a victim flow that shares no bottleneck (the module docstring)."""
    from hpnsim.fabrics import build_fabric
    from hpnsim.packet import PacketParams, simulate_paths
    from hpnsim.routing import route

    n, size = config.incast_senders, config.incast_bytes
    fabric = build_fabric("hpn7", {"segments": 2, "hosts_per_segment": n + 4,
                                   "backup_hosts": 0, "tor_uplinks": 8, "aggs_per_plane": 8,
                                   "nvlink": _nvlink()})
    senders, victim_src, victim_dst, shared = _incast_setup(fabric, n, config.seed)
    src = np.append(senders, victim_src)
    dst = np.append(np.zeros(n, dtype=np.int64), victim_dst)
    paths = route(fabric, src, dst, "hpn_dual_plane", port=0, seed=config.seed)
    tier = np.asarray(fabric.node_tier)
    incast_port = int(next(k for k in paths.links[paths.ptr[0]:paths.ptr[1]][::-1]
                           if tier[fabric.link_src[k]] >= 1))          # ToR -> receiver
    victim_links = [int(k) for k in paths.links[paths.ptr[n]:paths.ptr[n + 1]]]
    offered = {k: 0.0 for k in victim_links}
    line = float(fabric.link_capacity[fabric.gpu_access_link[0, 0]])
    for i in range(n + 1):
        for k in paths.links[paths.ptr[i]:paths.ptr[i + 1]]:
            if int(k) in offered:
                offered[int(k)] += line
    headroom = min(float(fabric.link_capacity[k]) / offered[k] for k in victim_links
                   if tier[fabric.link_src[k]] >= 1 or tier[fabric.link_dst[k]] >= 1)
    watched = [incast_port, *shared]
    out = {"senders": n, "bytes_per_sender": size, "gpu": PACKET_HOST_GPU,
           "nvlink": _nvlink(), "incast_port": fabric.link_name(incast_port),
           "victim": f"{fabric.link_name(victim_links[0]).split('->')[0]} -> "
                     f"{fabric.link_name(victim_links[-1]).split('->')[1]}",
           "victim_shared": [fabric.link_name(k) for k in shared],
           "victim_headroom": headroom, "runs": []}
    step(f"incast: the victim alone ({size / 2**20:g} MiB)")
    alone = simulate_paths(fabric, route(fabric, [victim_src], [victim_dst], "hpn_dual_plane",
                                         port=0, seed=config.seed), size)
    out["victim_alone"] = float(alone.makespan)
    params0 = PacketParams()
    out["ideal"] = n * size * _wire(params0) / float(fabric.link_capacity[incast_port])
    for label, cc, pfc in INCAST_CASES:
        step(f"incast: {n}:1, {label}")
        params = PacketParams(cc=cc, pfc=pfc)
        r = simulate_paths(fabric, paths, size, params=params, watch=watched,
                           sample_interval=max(out["ideal"] / 400, 1e-7), max_samples=4000)
        done = r.finish[:n]
        out["runs"].append({
            "case": label, "cc": cc, "pfc": pfc,
            "incast_time": float(done.max()) if np.isfinite(done).all() else None,
            "victim_time": float(r.finish[n]), **_counters(r),
            "incast_q_max": float(r.q_max[incast_port]),
            "incast_marks": int(r.marks[incast_port]),
            "upstream": _upstream(fabric, r, incast_port),
            "ports": _port_rows(fabric, r, [incast_port, *shared,
                                            *np.flatnonzero(r.pauses).tolist()]),
            "queue": _queue(r, fabric, watched, watched)})
    return out
