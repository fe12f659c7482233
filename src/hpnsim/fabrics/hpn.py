"""HPN 7.0 (Alibaba, SIGCOMM 2024): rail-optimized, dual-ToR, dual-plane two-tier pods.

Per segment: ``hosts_per_segment`` active hosts (+ backup hosts that only take ToR ports),
``rails`` GPUs per host, one NIC per GPU with ``ports_per_nic`` ports. Port ``p`` of the NIC on
rail ``r`` goes to ToR(segment, r, plane p). A ToR of plane ``p`` has one link to each of the
``aggs_per_plane`` Aggs of plane ``p`` (dual-plane); Aggs of plane ``p`` reach the core of plane
``p`` with ``agg_core_uplinks`` links each (15:1 by default). Pods beyond the first add the core.

dual_tor modes:
- ``"nonstacked"`` (HPN): two independent ToRs per rail, no link between them.
- ``"stacked"``: the same plus a peer link (``peer_links`` x ``uplink_speed``) between the pair;
  by default the peer link takes the ports of two backup hosts (6 instead of 8).
- ``"single"``: one ToR per rail; the NIC's ports are bonded into one ACCESS link pair
  (``link_port`` 0) of ``ports_per_nic`` x ``port_speed``, each port still taking a ToR port.
  The 51.2T ToR then serves 64 hosts (4 backups) with 60 x 400G uplinks.
"""

from __future__ import annotations

import inspect

from hpnsim.errors import InputError
from hpnsim.fabrics.assembly import choice, common_speeds, positive_int
from hpnsim.fabrics.fabric import FRONTEND, Fabric, NodeKind  # noqa: F401  (doctest)
from hpnsim.fabrics.frontend import FrontendSpec
from hpnsim.fabrics.hpn_sizing import hpn7_sizes
from hpnsim.fabrics.tiered import TieredSpec, build_tiered
from hpnsim.units import parse_bandwidth

DUAL_TOR_MODES = ("nonstacked", "stacked", "single")


def hpn7(pods: int = 1, segments: int | None = None, hosts_per_segment: int | None = None,
         backup_hosts: int | None = None, rails: int = 8, port_speed: str = "200G",
         ports_per_nic: int = 2, uplink_speed: str = "400G", tor_uplinks: int | None = None,
         aggs_per_plane: int | None = None, agg_core_uplinks: int | None = None,
         dual_plane: bool = True,
         dual_tor: str = "nonstacked", peer_links: int = 1, chip: str = "51.2T",
         core_ports: int | None = None, nvlink: str = "400GB/s", pcie: str = "Gen5x16",
         hop_latency: str = "1us", host_latency: str = "0.5us",
         last_pod_segments: int | None = None, frontend: bool = False,
         frontend_hosts_per_tor: int = 64, frontend_port_speed: str = "200G",
         frontend_tor_uplinks: int | None = None, frontend_aggs_per_pod: int | None = None,
         frontend_agg_uplinks: int | None = None, frontend_core_ports: int | None = None,
         storage_hosts: int | None = None, gpus_per_pcie_switch: int = 1,
         rail_only: bool = False, domain_gpus: int | None = None) -> Fabric:
    """Build an HPN 7.0 fabric (defaults: the published 15,360-GPU pod).

    ``segments``, ``hosts_per_segment``, ``backup_hosts``, ``tor_uplinks``, ``aggs_per_plane``
    and ``agg_core_uplinks`` left out are derived from the chip and the NIC (``chip``,
    ``port_speed``, ``ports_per_nic``, ``dual_tor``) by HPN's radix rules
    (:mod:`hpnsim.fabrics.hpn_sizing`): on 51.2T the published counts, on 102.4T the
    61,440-GPU pod of 30 segments of 2,048 GPUs.

    Parameters
    ----------
    pods, segments : pods (more than one adds the core tier) and segments per pod (default:
        as many as an Agg's down ports hold, 15 on 51.2T).
    last_pod_segments : segments of the last pod (default ``segments``), so a fabric can hold
        a GPU count that is not a whole number of pods; the last pod still has all its Aggs.
    hosts_per_segment, backup_hosts : active and backup hosts per segment (defaults on 51.2T
        128 and 8; 64 and 4 with ``dual_tor="single"``; 6 backups with ``"stacked"``). Backup hosts are
        not built as nodes: they take ToR ports (port check, bill of materials) only.
    rails : rails (ToR groups of a segment), and GPUs (and NICs) per host unless
        ``domain_gpus`` is given. ports_per_nic, port_speed : NIC ports and their speed.
    uplink_speed, tor_uplinks, aggs_per_plane : ToR uplinks, spread evenly over the Aggs of
        the ToR's plane (``tor_uplinks`` must be a multiple of ``aggs_per_plane``).
    agg_core_uplinks : uplinks per Agg toward the core (reserved when ``pods == 1``).
    dual_plane : ToRs of plane ``p`` reach only the Aggs of plane ``p``; else one set of Aggs.
    dual_tor : ``"nonstacked"``, ``"stacked"`` or ``"single"`` (see the module docstring).
    chip : switch chip bandwidth; every switch is checked against it.
    core_ports : ports per core switch (default: chip / uplink_speed).
    nvlink : bidirectional NVLink bandwidth per GPU; pcie : ``"Gen5x16"`` or a bandwidth.
    frontend : add the separate frontend network (hosts' CPUs, a 2-port frontend NIC per
        host, a 1:1 3-tier Clos with non-stacked dual ToRs, storage hosts); see
        :mod:`hpnsim.fabrics.frontend`. Its nodes have ``node_network == FRONTEND`` and come
        after every backend node and link, so backend ids do not change.
    frontend_hosts_per_tor : hosts per frontend ToR pair (64: two pairs per 128-host segment).
    frontend_port_speed : speed of each of the 2 frontend NIC (and storage host) ports.
    frontend_tor_uplinks, frontend_aggs_per_pod, frontend_agg_uplinks : default to 1:1
        (ToR uplinks carry all host ports, one per Agg; Agg uplinks equal its downlinks).
    frontend_core_ports : ports per frontend core switch (default chip / uplink_speed).
    storage_hosts : storage hosts (default: enough NIC bandwidth to write a 30 GB per GPU
        checkpoint of every GPU in 100 s).
    gpus_per_pcie_switch : ``k`` GPUs of a host under one PCIe switch with one NIC (its
        ``ports_per_nic`` ports to the ToRs of its rail); ``rails / k`` NICs per host, ToRs
        per segment and rail. Default 1: one NIC per GPU (the published host).
    rail_only : the ToRs of rail ``r`` (and of plane ``p`` with ``dual_plane``) link only to
        the Aggs of their own plane: ``rails`` (``2 x rails``) planes, no cross-rail path
        through the network (the paper's Table 4: 16 planes, 120 segments per pod). Give
        ``segments``: the derived count is for the any-to-any pod.
    domain_gpus : GPUs of one host on one NVLink domain (its NVSwitch), when larger than
        ``rails`` (a GB200 NVL72 rack: 72 GPUs on 8 rails, GPU ``g`` on rail ``g % rails``,
        9 NICs of a rack on each rail's ToR pair). Default: ``rails`` (the HGX host).

    Examples
    --------
    >>> f = hpn7()
    >>> f.n_gpus, f.meta["active_hosts"], f.nodes_where(kind=NodeKind.TOR).size
    (15360, 1920, 240)
    >>> f.nodes_where(kind=NodeKind.AGG).size
    120
    >>> hpn7(pods=2, last_pod_segments=8).n_gpus
    23552
    >>> h = hpn7(chip="102.4T")
    >>> h.n_gpus, h.nodes_where(kind=NodeKind.TOR).size, h.nodes_where(kind=NodeKind.AGG).size
    (61440, 480, 240)
    >>> g = hpn7(segments=1, frontend=True)
    >>> g.switches(network=FRONTEND).size, g.meta["frontend"]["storage_hosts"]
    (74, 7)
    """
    mode = choice(dual_tor, "dual_tor", DUAL_TOR_MODES)
    single = mode == "single"
    pods = positive_int(pods, "pods")
    ports_per_nic = positive_int(ports_per_nic, "ports_per_nic")
    if not single and ports_per_nic != 2:
        raise InputError("ports_per_nic", f"dual_tor={mode!r} needs 2 NIC ports (one per ToR), "
                                          f"got {ports_per_nic}; use dual_tor='single'")
    peer_links = positive_int(peer_links, "peer_links")
    speeds = {"port_speed": parse_bandwidth(port_speed, "port_speed"),
              "up_speed": parse_bandwidth(uplink_speed, "uplink_speed"),
              "chip": parse_bandwidth(chip, "chip")}
    domain = None if domain_gpus is None else _domain(rails, domain_gpus)
    derived = _derived(speeds["chip"], speeds["port_speed"], ports_per_nic, mode, peer_links,
                       1 if domain is None else domain // rails)

    def given(value, name):
        return derived[name] if value is None else value

    segments = positive_int(given(segments, "segments"), "segments")
    hosts = positive_int(given(hosts_per_segment, "hosts_per_segment"), "hosts_per_segment")
    backups = positive_int(given(backup_hosts, "backup_hosts"), "backup_hosts",
                           allow_zero=True)
    rails = positive_int(rails, "rails")
    tor_uplinks = positive_int(given(tor_uplinks, "tor_uplinks"), "tor_uplinks")
    aggs = positive_int(given(aggs_per_plane, "aggs_per_plane"), "aggs_per_plane")
    agg_up = positive_int(given(agg_core_uplinks, "agg_core_uplinks"), "agg_core_uplinks")
    if tor_uplinks % aggs:
        raise InputError("tor_uplinks", f"must be a multiple of aggs_per_plane={aggs} "
                                        f"(each ToR links evenly to every Agg of its plane), "
                                        f"got {tor_uplinks}")
    spec = TieredSpec(
        template="hpn7", pods=pods, segments=segments, hosts=hosts, backups=backups,
        gpus_per_host=rails if domain is None else domain, rail_groups=None if domain is None
        else rails, rail_optimized=True, sides=1 if single else 2,
        ports_per_nic=ports_per_nic, port_speed=speeds["port_speed"],
        tor_uplinks=tor_uplinks, aggs_per_plane=aggs,
        plane_by=_plane_by(dual_plane and not single, rail_only), agg_uplinks=agg_up,
        up_speed=speeds["up_speed"], chip=speeds["chip"],
        core_ports=None if core_ports is None else positive_int(core_ports, "core_ports"),
        peer_links=peer_links if mode == "stacked" else 0,
        last_pod_segments=None if last_pod_segments is None else positive_int(
            last_pod_segments, "last_pod_segments"),
        frontend=FrontendSpec(frontend_hosts_per_tor, frontend_port_speed,
                              frontend_tor_uplinks, frontend_aggs_per_pod, frontend_agg_uplinks,
                              storage_hosts, frontend_core_ports) if frontend else None,
        gpus_per_pcie_switch=positive_int(gpus_per_pcie_switch, "gpus_per_pcie_switch"),
        gpus_field="rails", **common_speeds(nvlink, pcie, hop_latency, host_latency),
        param_names=_PARAM_NAMES, reference=_reference(mode, derived))
    return build_tiered(spec, dual_tor=mode, dual_plane=spec.plane_by in ("side", "group_side"))


def _plane_by(dual_plane: bool, rail_only: bool) -> str:
    if rail_only:
        return "group_side" if dual_plane else "group"
    return "side" if dual_plane else "none"


#: TieredSpec field -> hpn7 parameter (port-check errors name the parameter)
_PARAM_NAMES = {"segments": "segments", "hosts": "hosts_per_segment",
                "backups": "backup_hosts", "gpus_per_host": "rails",
                "ports_per_nic": "ports_per_nic", "port_speed": "port_speed",
                "tor_uplinks": "tor_uplinks", "aggs_per_plane": "aggs_per_plane",
                "plane_by": "dual_plane", "agg_uplinks": "agg_core_uplinks",
                "up_speed": "uplink_speed", "peer_links": "peer_links", "chip": "chip"}


def hpn7_derived(**options) -> dict[str, int]:
    """The counts hpn7 derives for typed ``options`` (those not given take its defaults).

    >>> hpn7_derived(chip="102.4T")["hosts_per_segment"], hpn7_derived()["segments"]
    (256, 15)
    """
    d = {name: p.default for name, p in inspect.signature(hpn7).parameters.items()}
    d.update(options)
    mode = choice(d["dual_tor"], "dual_tor", DUAL_TOR_MODES)
    per_rail = 1 if d["domain_gpus"] is None else _domain(d["rails"], d["domain_gpus"]) \
        // d["rails"]
    return _derived(parse_bandwidth(d["chip"], "chip"),
                    parse_bandwidth(d["port_speed"], "port_speed"),
                    positive_int(d["ports_per_nic"], "ports_per_nic"), mode,
                    positive_int(d["peer_links"], "peer_links"), per_rail)


def _domain(rails, domain_gpus) -> int:
    rails = positive_int(rails, "rails")
    domain = positive_int(domain_gpus, "domain_gpus")
    if domain % rails:
        raise InputError("domain_gpus", f"must be a multiple of rails={rails} (each rail takes "
                                        f"the same GPUs of every domain), got {domain}")
    return domain


def _derived(chip: float, port_speed: float, ports_per_nic: int, mode: str,
             peer_links: int, gpus_per_rail: int = 1) -> dict[str, int]:
    """Counts hpn7 derives for a chip and NIC, at its default ToR-Agg link speed."""
    d = inspect.signature(hpn7).parameters
    return hpn7_sizes(chip, port_speed, ports_per_nic,
                      parse_bandwidth(d["uplink_speed"].default, "uplink_speed"), mode,
                      peer_links, gpus_per_rail)


def _reference(mode: str, derived: dict[str, int]) -> dict:
    """TieredSpec values of hpn7's defaults for a dual_tor ``mode`` and the counts derived
    for this chip and NIC: a switch over its chip is blamed on what differs from them."""
    d = {name: p.default for name, p in inspect.signature(hpn7).parameters.items()}
    return {"segments": derived["segments"], "hosts": derived["hosts_per_segment"],
            "backups": derived["backup_hosts"],
            "gpus_per_host": d["rails"], "ports_per_nic": d["ports_per_nic"],
            "port_speed": parse_bandwidth(d["port_speed"], "port_speed"),
            "tor_uplinks": derived["tor_uplinks"], "aggs_per_plane": derived["aggs_per_plane"],
            "plane_by": "none" if mode == "single" else "side",
            "agg_uplinks": derived["agg_core_uplinks"],
            "up_speed": parse_bandwidth(d["uplink_speed"], "uplink_speed"),
            "peer_links": d["peer_links"] if mode == "stacked" else 0,
            "chip": parse_bandwidth(d["chip"], "chip")}
