"""The fabrics HPN is measured against: DCN+, rail-optimized 3-tier, rail-only and fat-tree.

All are built by :func:`hpnsim.fabrics.tiered.build_tiered`; each builder only validates its
keyword parameters and states its topology.
"""

from __future__ import annotations

from hpnsim.errors import InputError
from hpnsim.fabrics.assembly import choice, common_speeds, pcie_nics_per_host, positive_int
from hpnsim.fabrics.fabric import Fabric
from hpnsim.fabrics.hpn import DUAL_TOR_MODES
from hpnsim.fabrics.tiered import TieredSpec, build_tiered
from hpnsim.units import parse_bandwidth

_HOST_DEFAULTS = {"nvlink": "400GB/s", "pcie": "Gen5x16", "hop_latency": "1us",
                  "host_latency": "0.5us"}


def _speeds(port_speed, uplink_speed, chip) -> dict[str, float]:
    return {"port_speed": parse_bandwidth(port_speed, "port_speed"),
            "up_speed": parse_bandwidth(uplink_speed, "uplink_speed"),
            "chip": parse_bandwidth(chip, "chip")}


def dcn_plus(pods: int = 1, segments: int = 4, hosts_per_segment: int = 16,
             backup_hosts: int = 0, gpus_per_host: int = 8, port_speed: str = "200G",
             ports_per_nic: int = 2, uplink_speed: str = "400G", tor_uplinks: int = 64,
             aggs_per_pod: int = 8, agg_core_uplinks: int = 64, dual_tor: str = "nonstacked",
             peer_links: int = 1, chip: str = "51.2T", core_ports: int | None = None,
             nvlink: str = "400GB/s", pcie: str = "Gen5x16", hop_latency: str = "1us",
             host_latency: str = "0.5us", gpus_per_pcie_switch: int = 1,
             dual_plane: bool = False) -> Fabric:
    """Alibaba DCN+: 3-tier Clos, dual ToR, full bisection, not rail-optimized.

    Every NIC of a host connects (port 0 / port 1) to its segment's ToR pair: 16 hosts
    (128 GPUs) per pair, 4 segments (512 GPUs) and 8 Aggs per pod, pods joined by a core
    (32 pods = 16,384 GPUs with 128-port cores). ``dual_tor`` as in :func:`hpn7`.
    ``gpus_per_pcie_switch = k > 1`` puts every ``k`` GPUs of a host under one PCIe switch
    with one NIC (``gpus_per_host / k`` NICs per host, each ``ports_per_nic x
    port_speed``): those GPUs share the switch's ``pcie`` link to the NIC and its ports.
    ``dual_plane`` (dual ToR only): ToR side ``p`` links only to the ``aggs_per_pod / 2``
    Aggs of plane ``p``, as in HPN.

    >>> f = dcn_plus(segments=1, hosts_per_segment=2, gpus_per_pcie_switch=2)
    >>> int(f.gpu_nic[0] == f.gpu_nic[1]), int(f.gpu_nic[1] == f.gpu_nic[2])
    (1, 0)

    >>> f = dcn_plus(pods=2)
    >>> f.n_gpus, len(f.meta["tiers"]), f.meta["tiers"]["core"]["switches"]
    (1024, 3, 64)
    """
    mode = choice(dual_tor, "dual_tor", DUAL_TOR_MODES)
    ports_per_nic = positive_int(ports_per_nic, "ports_per_nic")
    if mode != "single" and ports_per_nic != 2:
        raise InputError("ports_per_nic", f"dual_tor={mode!r} needs 2 NIC ports, got "
                                          f"{ports_per_nic}; use dual_tor='single'")
    aggs = positive_int(aggs_per_pod, "aggs_per_pod")
    if dual_plane and (mode == "single" or aggs % 2):
        raise InputError("dual_plane", f"needs a dual ToR and an even aggs_per_pod, got "
                                       f"dual_tor={mode!r}, aggs_per_pod={aggs}")
    spec = TieredSpec(
        template="dcn_plus", pods=positive_int(pods, "pods"),
        segments=positive_int(segments, "segments"),
        hosts=positive_int(hosts_per_segment, "hosts_per_segment"),
        backups=positive_int(backup_hosts, "backup_hosts", allow_zero=True),
        gpus_per_host=positive_int(gpus_per_host, "gpus_per_host"), rail_optimized=False,
        sides=1 if mode == "single" else 2, ports_per_nic=ports_per_nic,
        tor_uplinks=positive_int(tor_uplinks, "tor_uplinks"),
        aggs_per_plane=aggs // 2 if dual_plane else aggs,
        plane_by="side" if dual_plane else "none",
        agg_uplinks=positive_int(agg_core_uplinks, "agg_core_uplinks"),
        core_ports=None if core_ports is None else positive_int(core_ports, "core_ports"),
        peer_links=positive_int(peer_links, "peer_links") if mode == "stacked" else 0,
        **_speeds(port_speed, uplink_speed, chip),
        gpus_per_pcie_switch=positive_int(gpus_per_pcie_switch, "gpus_per_pcie_switch"),
        **common_speeds(nvlink, pcie, hop_latency, host_latency))
    return build_tiered(spec, dual_tor=mode, dual_plane=dual_plane)


def rail_optimized(pods: int = 1, segments: int = 8, hosts_per_segment: int = 64,
                   backup_hosts: int = 0, rails: int = 8, port_speed: str = "400G",
                   uplink_speed: str = "400G", tor_uplinks: int = 64, aggs_per_pod: int = 64,
                   agg_core_uplinks: int = 64, chip: str = "51.2T",
                   core_ports: int | None = None, nvlink: str = "900GB/s",
                   pcie: str = "Gen5x16", hop_latency: str = "1us",
                   host_latency: str = "0.5us", gpus_per_pcie_switch: int = 1) -> Fabric:
    """Rail-optimized 3-tier Clos (NVIDIA SuperPod / Spectrum-X style), single ToR per rail.

    Hosts: DGX H100 (:data:`~hpnsim.fabrics.hosts.HOST_GPUS`), so ``nvlink`` defaults to
    H100's 900 GB/s.

    One 400G NIC port per GPU; a segment is ``rails`` ToRs serving ``hosts_per_segment``
    hosts (8 x 64 = 512 GPUs); every ToR links to every Agg (spine) of its pod; pods are
    joined through a core. ``gpus_per_pcie_switch = k > 1``: every ``k`` GPUs of a host
    share one PCIe switch and its NIC, so a host has ``rails / k`` NICs and a segment
    ``rails / k`` ToRs (a rail per NIC).

    >>> f = rail_optimized(segments=2)
    >>> f.n_gpus, f.meta["tiers"]["tor"]["switches"]
    (1024, 16)
    """
    spec = TieredSpec(
        template="rail_optimized", pods=positive_int(pods, "pods"),
        segments=positive_int(segments, "segments"),
        hosts=positive_int(hosts_per_segment, "hosts_per_segment"),
        backups=positive_int(backup_hosts, "backup_hosts", allow_zero=True),
        gpus_per_host=positive_int(rails, "rails"), rail_optimized=True, sides=1,
        ports_per_nic=1, tor_uplinks=positive_int(tor_uplinks, "tor_uplinks"),
        aggs_per_plane=positive_int(aggs_per_pod, "aggs_per_pod"), plane_by="none",
        agg_uplinks=positive_int(agg_core_uplinks, "agg_core_uplinks"),
        core_ports=None if core_ports is None else positive_int(core_ports, "core_ports"),
        peer_links=0, **_speeds(port_speed, uplink_speed, chip),
        gpus_per_pcie_switch=positive_int(gpus_per_pcie_switch, "gpus_per_pcie_switch"),
        gpus_field="rails", **common_speeds(nvlink, pcie, hop_latency, host_latency))
    return build_tiered(spec, dual_tor="single", dual_plane=False)


def rail_only(segments: int = 16, hosts_per_segment: int = 64, backup_hosts: int = 0,
              rails: int = 8, port_speed: str = "400G", uplink_speed: str = "400G",
              tor_uplinks: int = 64, aggs_per_rail: int = 8, chip: str = "51.2T",
              nvlink: str = "900GB/s", pcie: str = "Gen5x16", hop_latency: str = "1us",
              host_latency: str = "0.5us", gpus_per_pcie_switch: int = 1) -> Fabric:
    """Rail-only: one two-tier network per rail; cross-rail traffic only through NVLink.

    Hosts: DGX H100 as in the rail-only paper (:data:`~hpnsim.fabrics.hosts.HOST_GPUS`), so
    ``nvlink`` defaults to H100's 900 GB/s.

    Each segment has one ToR per rail; the ToR of rail ``r`` links only to the
    ``aggs_per_rail`` Aggs of rail ``r`` (the Aggs are partitioned into per-rail planes).
    ``gpus_per_pcie_switch = k > 1``: ``k`` GPUs share a PCIe switch and its NIC, one rail
    (ToR, Agg plane) per NIC: ``rails / k`` rails.

    >>> f = rail_only(segments=2)
    >>> f.n_gpus, f.meta["planes"]
    (1024, 8)
    """
    spec = TieredSpec(
        template="rail_only", pods=1, segments=positive_int(segments, "segments"),
        hosts=positive_int(hosts_per_segment, "hosts_per_segment"),
        backups=positive_int(backup_hosts, "backup_hosts", allow_zero=True),
        gpus_per_host=positive_int(rails, "rails"), rail_optimized=True, sides=1,
        ports_per_nic=1, tor_uplinks=positive_int(tor_uplinks, "tor_uplinks"),
        aggs_per_plane=positive_int(aggs_per_rail, "aggs_per_rail"), plane_by="group",
        agg_uplinks=0, core_ports=None, peer_links=0,
        **_speeds(port_speed, uplink_speed, chip),
        gpus_per_pcie_switch=positive_int(gpus_per_pcie_switch, "gpus_per_pcie_switch"),
        gpus_field="rails", **common_speeds(nvlink, pcie, hop_latency, host_latency))
    return build_tiered(spec, dual_tor="single", dual_plane=False)


def fat_tree(k: int, gpus_per_host: int = 1, link_speed: str = "400G", chip: str = "51.2T",
             nvlink: str = "400GB/s", pcie: str = "Gen5x16", hop_latency: str = "1us",
             host_latency: str = "0.5us", gpus_per_pcie_switch: int = 1) -> Fabric:
    """k-ary fat-tree (Al-Fares et al.): k pods of k/2 edge and k/2 Agg switches, (k/2)^2 cores.

    k^3/4 NICs, one per edge port; ``gpus_per_host`` GPUs share a host (and an edge switch).
    By default every GPU has its own NIC (k^3/4 GPUs) and ``gpus_per_host`` must divide
    k/2; with ``gpus_per_pcie_switch = p > 1`` every ``p`` GPUs of a host share one PCIe
    switch and its NIC, so a host takes ``gpus_per_host / p`` edge ports (which must divide
    k/2) and the fabric holds ``p`` k^3/4 GPUs. Every link runs at ``link_speed``; switches
    have k ports.

    >>> f = fat_tree(4)
    >>> f.n_gpus, f.switches().size
    (16, 20)
    """
    k = positive_int(k, "k")
    if k % 2 or k < 2:
        raise InputError("k", f"must be an even integer >= 2, got {k}")
    gpus_per_host = positive_int(gpus_per_host, "gpus_per_host")
    half = k // 2
    nics = pcie_nics_per_host(gpus_per_host, gpus_per_pcie_switch, "gpus_per_host")
    if half % nics and nics == gpus_per_host:
        raise InputError("gpus_per_host", f"must divide k/2 = {half}, got {gpus_per_host}")
    if half % nics:
        raise InputError("gpus_per_pcie_switch", f"leaves {nics} NICs per host, which must "
                                                 f"divide k/2 = {half} (edge ports), got "
                                                 f"{gpus_per_pcie_switch}")
    speed = parse_bandwidth(link_speed, "link_speed")
    spec = TieredSpec(
        template="fat_tree", pods=k, segments=half, hosts=half // nics, backups=0,
        gpus_per_host=gpus_per_host, rail_optimized=False, sides=1, ports_per_nic=1,
        port_speed=speed, tor_uplinks=half, aggs_per_plane=half, plane_by="none",
        agg_uplinks=half, up_speed=speed, chip=parse_bandwidth(chip, "chip"), core_ports=k,
        peer_links=0, hosts_field="k", segments_field="k",
        gpus_per_pcie_switch=gpus_per_host // nics,
        **common_speeds(nvlink, pcie, hop_latency, host_latency))
    return build_tiered(spec, dual_tor="single", dual_plane=False, k=k)
