"""Tree and NVLS-tree all-reduce through the packet engine as NCCL's chunked pipeline.

NCCL 2.18.3 runs a tree all-reduce channel by channel in chunks (``src/collectives/device/
all_reduce.h``, ``runTreeSplit`` and ``runTreeUpDown``: each loop moves one chunk per
channel): a rank reduces chunk c once it has chunk c from all its children and sends it to
its parent; the root's sum flows back down, chunk by chunk. NVLS-tree (``runNvlsTree``)
adds an NVSwitch reduction of the chunk inside each host before the tree and an NVSwitch
multicast after it. Each chunk is one step of a connection's ``NCCL_STEPS`` = 8 slots
(``src/include/devcomm.h``; ``chunkSteps`` is 1 for every algorithm but the ring in
``computeColl``, ``src/enqueue.cc``), so a sender is at most 8 chunks ahead of the rank
that consumes them.

What each planned tree stage (one NCCL channel: :func:`~hpnsim.collectives.schedules.tree.tree_stages`)
becomes (:func:`tree_hops`), as :class:`~hpnsim.packet.pipeline.Hop`\\ s:

* an up hop per edge (child -> parent): it needs the up hops into the child; it frees its
  slot when the parent has forwarded the chunk (the parent's up hop, or, at the root, its
  down hops and NVLS multicast);
* a down hop per edge (parent -> child): it needs the down hop into the parent (at the root:
  the up hops into it); its slot frees when the child has forwarded the chunk;
* NVLS-tree: per host and rail stage, a reduction hop (every GPU of the host sends the chunk
  to its NVSwitch, the switch returns the sum to the rail's GPU), needed by that GPU's up
  hop (and the root's down hops), and a multicast hop (the rail's GPU stores the chunk, the
  switch writes it to every GPU of the host) after the down hop into it; NVLink loads over
  ``nvls_efficiency``; no slot bound (NVLS buffers are not NCCL connections).

Members are the stage's routed paths (QP-expanded: each chunk is cut over the QPs, as
``ncclIbMultiSend`` does), cut to their NIC-to-NIC legs as the ring and graph paths cut
them (:func:`~hpnsim.collectives.packet.graph.member_legs`). Chunk size per channel:
:func:`tree_chunk`. Protocols other than Simple (LL, LL128) run as the task graph. Where
the rails run alike (one HPN segment), one rail is simulated for all
(:mod:`~hpnsim.collectives.packet.rails`; ``PacketRun.share_rails``).
"""

from __future__ import annotations

import numpy as np

from hpnsim.errors import InputError

__all__ = ["NCCL_STEPS", "check_tree_packet", "nvlstree_streams", "run_tree_packet", "tree_chunk",
           "tree_hops", "tree_pipelined"]

#: steps (slots) per connection buffer: NCCL 2.18.3 src/include/devcomm.h
NCCL_STEPS = 8


def tree_pipelined(plan) -> bool:
    """Whether the packet engine runs ``plan`` as NCCL's chunked tree pipeline: a tree or
    NVLS-tree all-reduce with the Simple protocol.

    >>> from hpnsim.collectives.planning.plan import plan_collective
    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    >>> tree_pipelined(plan_collective(f, "allreduce", range(16), 2**28, algo="tree",
    ...                                protocol="simple"))
    True
    """
    return plan.schedule.op == "allreduce" and plan.algo in ("tree", "nvlstree") \
        and plan.protocol == "simple"


def _tree_stages(plan) -> list:
    return [s for s in plan.schedule.stages if s.switch is None]


def nvlstree_streams(plan) -> int:
    """NCCL 2.18.3's concurrent chunk streams of an NVLS-tree all-reduce: ``nvlsChannels``
    (16, ``NCCL_NVLS_NCHANNELS``, ``src/transport/nvls.cc``) x ``nHeads`` (the NVLS graph's
    channels, one head GPU per NIC up to the host's GPU count: ``ncclTopoCompareGraphs``
    in ``src/graph/search.cc``, ``connectNvls`` in ``src/graph/connect.cc``): the
    ``concurrentOps`` of ``computeColl`` (``src/enqueue.cc``), here the plan's rails.

    >>> from hpnsim.collectives.planning.plan import plan_collective
    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    >>> nvlstree_streams(plan_collective(f, "allreduce", range(16), 2**30, algo="nvlstree",
    ...                                  protocol="simple"))
    128
    """
    from hpnsim.collectives.closed_form.nvlstree import NVLS_CHANNELS
    from hpnsim.collectives.packet.rails import rail_of

    rails = {rail_of(s.name) for s in _tree_stages(plan)}
    return NVLS_CHANNELS * len(rails)


def tree_chunk(plan, gpus_per_host: int = 8) -> float:
    """Bytes per chunk of one planned tree stage of a tree or NVLS-tree all-reduce (Simple),
    from NCCL 2.18.3's ``computeColl`` (``src/enqueue.cc``): one step of the buffer
    (``NcclParams.chunk_bytes``, 4 MiB / NCCL_STEPS = 512 KiB).

    * tree: halved while ``size / (channels x chunk)`` is under ``8 x depth`` (down to 128
      KiB), ``4 x depth`` (64 KiB) and ``depth`` (32 KiB), with ``depth = ranks/hosts - 1 +
      floor(log2 hosts)`` (``src/graph/connect.cc``); channels are the planned stages.
    * NVLS-tree: capped at 256, 128, 64, 32 KiB when ``size`` is under 32, 16, 4, 1 x
      (concurrent streams x chunk), the streams NCCL's (:func:`nvlstree_streams`, 128 on 8
      GPUs a host: :func:`~hpnsim.collectives.closed_form.nvlstree.nvlstree_chunk`). The plan
      has fewer tree stages (rails x 2 trees x its channels, 32 by default), each standing
      for ``streams / stages`` of NCCL's streams on the same edges: a stage moves their
      chunks as one chunk of ``streams / stages`` x NCCL's (the bytes in flight per slot
      and the time a chunk holds an edge are theirs together, as when they share the link).

    >>> from hpnsim.collectives.planning.plan import plan_collective
    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    >>> p = plan_collective(f, "allreduce", range(16), 2**30, algo="tree", protocol="simple")
    >>> tree_chunk(p) / 1024, len(p.schedule.stages)   # 1 GiB / (32 x 512 K) = 64 = 8 x 8
    (512.0, 32)
    >>> tree_chunk(plan_collective(f, "allreduce", range(16), 2**26, algo="tree",
    ...                            protocol="simple")) / 1024    # 2 MiB per channel: 32 chunks
    64.0

    NVLS-tree at 1 GiB: NCCL's 128 streams of 256 KiB chunks (1 GiB < 16 x 128 x 512 KiB),
    4 to each of the 32 planned stages:

    >>> tree_chunk(plan_collective(f, "allreduce", range(16), 2**30, algo="nvlstree",
    ...                            protocol="simple")) / 1024
    1024.0
    """
    size = float(plan.schedule.size)
    chunk = float(plan.nccl.chunk_bytes)
    channels = len(_tree_stages(plan))
    if plan.algo == "nvlstree":
        streams = nvlstree_streams(plan)
        for times, cap in ((32, 262144), (16, 131072), (4, 65536), (1, 32768)):
            if size < times * streams * chunk and chunk > cap:
                chunk = float(cap)
        return chunk * streams / channels
    ranks = plan.schedule.gpus.size
    hosts = len({int(g) // gpus_per_host for g in plan.schedule.gpus.tolist()})
    depth = ranks // hosts - 1 + (hosts.bit_length() - 1)
    for times, floor in ((8, 131072), (4, 65536), (1, 32768)):
        while size // (channels * chunk) < depth * times and chunk > floor:
            chunk /= 2
    return chunk


def _members(fabric, paths, qps: int, scale: float) -> list:
    """Per member of a stage: (legs, weights) of its QP paths cut to packet legs."""
    from hpnsim.collectives.packet.graph import member_legs

    n = paths.n_flows
    task, legs, weight = member_legs(fabric, np.arange(n), paths.ptr, paths.links,
                                     paths.weight)
    out = [([], []) for _ in range(n // qps)]
    for t, leg, w in zip(task.tolist(), legs, weight.tolist(), strict=True):
        out[t // qps][0].append(leg)
        out[t // qps][1].append(w * scale / qps)
    return out


def _nvls_links(fabric, plan) -> dict:
    """GPU -> (its link to the NVSwitch, the NVSwitch's link back) of the NVLS stage."""
    stage = plan.schedule.stages[0]
    p = plan.paths[0]
    out = {}
    for m, g in enumerate(stage.src.tolist()):
        i = m * plan.qps
        out[int(g)] = (int(p.links[p.ptr[i]]), int(p.links[p.ptr[i] + 1]))
    return out


def nvlink_packet(fabric, nvls_links, net_ports, mtu: float) -> float:
    """Payload bytes per packet on NVLS's NVLink legs: as many whole MTUs as NVLink
    serializes in the time the fastest NIC port serializes one (HPN 7.0's 200 GB/s NVLink
    against 25 GB/s ports: 8 x 4096 = 32 KiB). NVLink legs cross no buffer and no
    congestion control in this model, so their packet only sets how finely flows
    interleave on a GPU's link and when a chunk's last bytes arrive; at the NIC's time
    granularity that moves a 4-host NVLS-tree by under 1% (tests/test_packet_tree.py),
    and cuts the NVLink events, 85% of a 448-GPU NVLS-tree's, eightfold.

    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    >>> nv = [i for i in range(len(f.link_capacity)) if "nvswitch" in f.link_name(i)]
    >>> nic = [i for i in range(len(f.link_capacity))
    ...        if "/nic" in f.link_name(i).split("->")[0] and "tor" in f.link_name(i)]
    >>> nvlink_packet(f, nv, nic, 4096.0)
    32768.0
    """
    cap = np.asarray(fabric.link_capacity, dtype=np.float64)
    nv = np.asarray(list(nvls_links), dtype=np.int64)
    ports = np.asarray(list(net_ports), dtype=np.int64)
    if not nv.size or not ports.size:
        return float(mtu)
    return float(mtu) * max(1.0, float(np.floor(cap[nv].min() / cap[ports].max() + 1e-9)))


def tree_hops(fabric, plan, mtu: float | None = None, rail: int | None = None) -> list:
    """The :class:`~hpnsim.packet.pipeline.Hop`\\ s of a planned tree or NVLS-tree
    all-reduce (see the module docstring), weights in wire bytes per chunk byte of a rail
    or tree stage. With ``mtu``, the NVLS hops' packets are :func:`nvlink_packet`'s; with
    ``rail``, only that rail's stages' hops (:func:`~hpnsim.collectives.packet.rails.rail_of`).

    >>> from hpnsim.collectives.planning.plan import plan_collective
    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    >>> p = plan_collective(f, "allreduce", range(16), 2**28, algo="tree", protocol="simple",
    ...                     channels=1)
    >>> hops = tree_hops(f, p)   # 2 trees x 2 directions x (2 x 7 NVLink + 1 network edges)
    >>> len(hops), sorted({len(h.needs) for h in hops})
    (60, [0, 1, 2])
    """
    from hpnsim.collectives.packet.rails import rail_of

    efficiency = plan.nccl.protocol_efficiency(plan.protocol)
    nvls = plan.algo == "nvlstree"
    gpu_links = _nvls_links(fabric, plan) if nvls else {}
    switch = np.asarray(fabric.link_dst)
    hosts: dict = {}                                  # NVSwitch -> its GPUs
    for g, (up, _) in gpu_links.items():
        hosts.setdefault(int(switch[up]), []).append(g)
    w = 1.0 / efficiency / plan.nccl.nvls_efficiency
    nvls_legs = {}                                    # GPU -> (reduction legs, multicast legs)
    for g, (up, down) in gpu_links.items():
        peers = hosts[int(switch[up])]
        peers = peers[peers.index(g):] + peers[:peers.index(g)]      # from g on: every rail
        nvls_legs[g] = ([([gpu_links[p][0]],) for p in peers] + [([down],)],
                        [([up],)] + [([gpu_links[p][1]],) for p in peers])
    hops: list = []
    staged = []
    for i, stage in enumerate(plan.schedule.stages):
        if stage.switch is not None or (rail is not None and rail_of(stage.name) != rail):
            continue
        m = stage.n_members // 2
        if not (np.array_equal(stage.src[m:], stage.dst[:m])
                and np.array_equal(stage.dst[m:], stage.src[:m])):
            raise InputError("algo", f"stage {stage.name} is not a tree's up and down edges")
        staged.append((stage, m, _members(fabric, plan.paths[i], plan.qps, 1.0 / efficiency)))
    packet = None
    if nvls and mtu is not None:
        from hpnsim.fabrics.fabric import LinkKind

        nvlink = np.asarray(fabric.link_kind) == LinkKind.NVLINK
        nv = {x for pair in gpu_links.values() for x in pair}
        ports = {int(part[0]) for _, _, members in staged for legs, _ in members
                 for leg in legs for part in leg if not nvlink[np.asarray(part)].all()}
        packet = nvlink_packet(fabric, nv, ports, mtu)
    for stage, m, members in staged:
        hops.extend(_stage_hops(stage.src[:m].tolist(), stage.dst[:m].tolist(), members,
                                len(hops), nvls_legs if nvls else None, w, packet))
    return hops


def _stage_hops(up_src: list, up_dst: list, members: list, base: int, nvls_legs, w: float,
                packet: float | None = None):
    """Hops of one tree stage (edges ``up_src[e] -> up_dst[e]``, ``members[e]`` the up
    edge's and ``members[m + e]`` the down edge's (legs, weights)), numbered from ``base``:
    up hops, down hops, then (NVLS-tree) a reduction and a multicast hop per rank."""
    from hpnsim.packet.pipeline import Hop

    m = len(up_src)
    up_of = {s: base + e for e, s in enumerate(up_src)}              # a rank's own up hop
    into, down_from = {}, {}                     # rank -> up hops into it, down hops from it
    for e, d in enumerate(up_dst):
        into.setdefault(d, []).append(base + e)
        down_from.setdefault(d, []).append(base + m + e)
    down_into = {s: base + m + e for e, s in enumerate(up_src)}       # down hop into a rank
    order = sorted(set(up_src) | set(up_dst))
    root = (set(order) - set(up_src)).pop()
    nvls = nvls_legs is not None
    red = {g: base + 2 * m + j for j, g in enumerate(order)}
    cast = {g: base + 2 * m + len(order) + j for j, g in enumerate(order)}

    def forwarders(v, down: bool) -> tuple:
        if not down and v != root:
            return (up_of[v],)
        return tuple(down_from.get(v, ())) + ((cast[v],) if nvls else ())

    def reduced(v) -> tuple:
        return tuple(into.get(v, ())) + ((red[v],) if nvls else ())

    hops = [Hop(members[e][0], np.asarray(members[e][1]), reduced(up_src[e]),
                forwarders(up_dst[e], False)) for e in range(m)]
    for e in range(m):
        parent = up_dst[e]
        needs = reduced(parent) if parent == root else (down_into[parent],)
        hops.append(Hop(members[m + e][0], np.asarray(members[m + e][1]), needs,
                        forwarders(up_src[e], True)))
    if nvls:
        for g in order:            # every GPU of g's host sends the chunk, g gets the sum
            legs = nvls_legs[g][0]
            hops.append(Hop(legs, np.full(len(legs), w), (), forwarders(g, False), packet))
        for g in order:            # g stores the result, the switch writes it to every GPU
            legs = nvls_legs[g][1]
            needs = reduced(g) if g == root else (down_into[g],)
            hops.append(Hop(legs, np.full(len(legs), w), needs, (), packet))
    return hops


def _checked(fabric, plan, run, state=None, coarse_nvlink: bool = True):
    """Hops to simulate, chunk, stage bytes, parameters, the rails they stand for
    (:func:`_shared_rails`) and the packet hops of the first window (or of every chunk);
    beyond ``run.max_packets`` an InputError named ``max_packets``."""
    from hpnsim.packet import PacketParams
    from hpnsim.packet.pipeline import pipeline_depth, pipeline_flows

    params = (run.params or PacketParams()).validate()
    gpus_per_host = int(getattr(fabric, "gpus_per_host", 8))
    mtu = params.mtu_bytes if coarse_nvlink else None
    hops = tree_hops(fabric, plan, mtu)
    if state is not None:
        legs = [leg for h in hops for leg in h.legs]
        used = np.concatenate([np.asarray(x, dtype=np.int64) for leg in legs for x in leg])
        dead = used[~np.asarray(state.up)[used]]
        if dead.size:
            raise InputError("state", f"no path around the down link "
                                      f"{fabric.link_name(int(dead[0]))}: it cannot run")
    share, hops = _shared_rails(fabric, plan, run, params, mtu, state, hops)
    chunk = tree_chunk(plan, gpus_per_host)
    stage_size = float(_tree_stages(plan)[0].size)
    n_chunks = int(np.ceil(stage_size / chunk - 1e-9))
    simulated = n_chunks if not run.window else min(n_chunks, FIRST_WINDOW)
    while simulated < n_chunks and simulated // 2 < pipeline_depth(hops):   # as the window
        simulated = min(n_chunks, 2 * simulated)
    estimate = pipeline_flows(hops, [chunk], NCCL_STEPS, params.mtu_bytes).packet_hops * simulated
    if estimate > run.max_packets:
        hint = "" if run.window else ", or use the windowed mode (drop --no-window)"
        raise InputError("max_packets", f"the chunked {plan.algo} allreduce would simulate "
                                        f"~{estimate:.3g} packet hops, over the limit "
                                        f"{run.max_packets:.3g}: raise --max-packets{hint}")
    return hops, chunk, stage_size, params, share, estimate


def _shared_rails(fabric, plan, run, params, mtu, state, hops):
    """``(RailShare, rail 0's hops on its joined links)`` where every rail runs as rail 0 does
    (:func:`~hpnsim.collectives.packet.rails.rail_share`) and ``run.share_rails``;
    ``(None, hops)`` where the user watches ports of their choosing (they may lie on any
    rail), a stage belongs to no rail, or the rails differ."""
    from hpnsim.collectives.packet.ports import packet_capacity
    from hpnsim.collectives.packet.rails import rail_of, rail_share
    from hpnsim.packet.adapter import fabric_links

    rails = [rail_of(s.name) for s in _tree_stages(plan)]
    if not run.share_rails or len(run.watch) or None in rails or len(set(rails)) < 2:
        return None, hops
    per_rail = [tree_hops(fabric, plan, mtu, rail=r) for r in sorted(set(rails))]
    links = fabric_links(fabric)
    share = rail_share(per_rail, packet_capacity(fabric, plan.nccl, params, state),
                       fabric.link_latency, links["switch_of"], links["framed"])
    return (None, hops) if share is None else (share, share.hops(per_rail[0]))


#: chunks per stage the windowed mode simulates first (it doubles while not steady)
FIRST_WINDOW = 16


def check_tree_packet(fabric, plan, run, state=None) -> float:
    """Packet hops :func:`run_tree_packet` simulates first (the first window, or every
    chunk); beyond ``run.max_packets`` an :class:`~hpnsim.errors.InputError` named
    ``max_packets``.

    >>> from hpnsim.collectives.packet.run import PacketRun
    >>> from hpnsim.collectives.planning.plan import plan_collective
    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    >>> plan = plan_collective(f, "allreduce", range(16), 2**30, algo="tree", protocol="simple")
    >>> check_tree_packet(f, plan, PacketRun(max_packets=1e5))
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: max_packets: the chunked tree allreduce would simulate ~7.86e+06 packet hops, over the limit 1e+05: raise --max-packets
    """
    return _checked(fabric, plan, run, state)[-1]


def run_tree_packet(fabric, plan, size: float, routing: str, run, state=None, *,
                    coarse_nvlink: bool = True):
    """A planned tree or NVLS-tree all-reduce (Simple) as NCCL's chunked pipeline in the
    packet engine: a :class:`~hpnsim.collectives.packet.result.PacketCollectiveResult` whose
    ``steps`` are the chunks per channel, ``steps_simulated`` those simulated (windowed
    mode: until the per-chunk time is steady, the rest extrapolated, ``extrapolated`` their
    share), ``network_time`` the packets' time and ``nccl_latency`` NCCL's software terms
    along the schedule (:func:`~hpnsim.collectives.packet.graph.chain_latency`), added as
    for rings. ``coarse_nvlink``: NVLS's NVLink legs move :func:`nvlink_packet`'s packets
    (False: the MTU, as every other flow).

    >>> from hpnsim.collectives.packet.run import PacketRun
    >>> from hpnsim.collectives.planning.plan import plan_collective
    >>> from hpnsim.fabrics import hpn7
    >>> f = hpn7(segments=1, hosts_per_segment=2, backup_hosts=0)
    >>> plan = plan_collective(f, "allreduce", range(16), 2**26, algo="tree", protocol="simple")
    >>> r = run_tree_packet(f, plan, 2**26, "hpn_dual_plane", PacketRun())
    >>> r.algo, r.steps, r.drops, bool(r.network_time > 0)
    ('tree', 32, 0, True)
    """
    from hpnsim.collectives.packet.graph import _compiled, _watch, chain_latency
    from hpnsim.collectives.packet.ports import packet_capacity
    from hpnsim.collectives.packet.result import packet_collective_result
    from hpnsim.collectives.planning.run import concurrent_link_flows
    from hpnsim.engine import simulate
    from hpnsim.packet.adapter import fabric_links
    from hpnsim.packet.pipeline import simulate_pipeline

    hops, chunk, stage_size, params, share, estimate = _checked(fabric, plan, run, state,
                                                                coarse_nvlink)
    graph, compiled = _compiled(fabric, plan, state)
    flow_time = float(simulate(graph, fabric.link_capacity if state is None
                               else state.capacity).finish[compiled.final].max())
    links = fabric_links(fabric)
    switch_of = links["switch_of"]
    capacity = packet_capacity(fabric, plan.nccl, params, state)
    watch = _watch(fabric, [leg for h in hops for leg in h.legs], switch_of, run.watch,
                   run.max_watch)
    pipe = simulate_pipeline(capacity if share is None else share.capacity(capacity),
                             fabric.link_latency, hops, stage_size, chunk,
                             NCCL_STEPS, params, window=run.window,
                             first_window=FIRST_WINDOW, max_packets=run.max_packets,
                             switch_of=switch_of, reverse=links["reverse"],
                             framed=links["framed"], watch=watch,
                             sample_interval=max(2 * flow_time / run.samples, 1e-8),
                             max_samples=4 * run.samples + 16, pct=(99.0,))
    res = pipe.result if share is None else share.expand(pipe.result)
    latency = chain_latency(plan)
    time = pipe.time + latency
    link_bytes = np.asarray(res.tx_bytes, dtype=np.float64) * (pipe.n_chunks
                                                               / pipe.chunks_simulated)
    max_flows, collisions = concurrent_link_flows(compiled, fabric, state)
    return packet_collective_result(
        fabric, res, op="allreduce", size=size, time=time, busy_time=pipe.time,
        link_bytes=link_bytes, capacity=capacity, switch_of=switch_of, watch=watch,
        watch_chosen=bool(run.watch), state=state, algo=plan.algo, protocol=plan.protocol,
        routing=routing, n_gpus=plan.schedule.gpus.size, max_link_flows=max_flows,
        hash_collisions=collisions, n_groups=len(graph), network_time=pipe.time,
        nccl_latency=latency, steps=int(np.ceil(pipe.n_chunks - 1e-9)),
        steps_simulated=pipe.chunks_simulated, extrapolated=pipe.extrapolated,
        stable=pipe.stable, packets_estimated=estimate,
        rail_copies=1 if share is None else share.rails)
