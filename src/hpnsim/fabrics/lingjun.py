"""Import the Alibaba Lingjun cluster topology (``ip,DSW,PSW,ASW`` per host).

The trace names logical switch groups: an ASW name repeats under different PSWs, so a ToR
is the ``(PSW, ASW)`` pair, and a PSW serving hundreds of hosts is many chips. We expand
each PSW into ``aggs_per_psw`` single-chip Aggs (every ToR of the PSW links evenly to all of
them) and the DSW tier into one core per Agg index (Agg ``j`` of every PSW links to core
``j``), so every switch passes the chip check like the templated fabrics.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np

from hpnsim.errors import InputError, read_user_text
from hpnsim.fabrics.assembly import (
    Assembly,
    add_hosts,
    check_ports,
    common_speeds,
    pcie_nics_per_host,
    positive_int,
    tier_plan,
)
from hpnsim.fabrics.fabric import Fabric, LinkKind, NodeKind
from hpnsim.units import parse_bandwidth

DEFAULT_PATH = "/work/shared/data/lingjun/topo.csv"


def read_lingjun(path: str | Path) -> tuple[np.ndarray, np.ndarray, list[str], list[str]]:
    """Read the CSV: per host (sorted by PSW, ASW, then file order) its PSW and ToR index.

    Returns ``(host_psw, host_tor, psw_names, tor_names)``; ToR names are ``PSW/ASW``.
    """
    text = read_user_text(path, "path", "CSV file")
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    if not rows or not {"DSW", "PSW", "ASW"} <= set(rows[0]):
        raise InputError("path", f"{str(path)!r} needs columns ip,DSW,PSW,ASW")
    psw_names = sorted({r["PSW"] for r in rows})
    tor_names = sorted({f"{r['PSW']}/{r['ASW']}" for r in rows})
    psw_id = {name: i for i, name in enumerate(psw_names)}
    tor_id = {name: i for i, name in enumerate(tor_names)}
    host_tor = np.array([tor_id[f"{r['PSW']}/{r['ASW']}"] for r in rows], dtype=np.int32)
    host_psw = np.array([psw_id[r["PSW"]] for r in rows], dtype=np.int32)
    order = np.argsort(host_tor, kind="stable")
    return host_psw[order], host_tor[order], psw_names, tor_names


def from_lingjun(path: str = DEFAULT_PATH, gpus_per_host: int = 8, port_speed: str = "200G",
                 ports_per_nic: int = 2, uplink_speed: str = "400G", tor_uplinks: int = 64,
                 aggs_per_psw: int = 64, agg_uplinks: int | None = None, chip: str = "51.2T",
                 nvlink: str = "400GB/s", pcie: str = "Gen5x16", hop_latency: str = "1us",
                 host_latency: str = "0.5us", gpus_per_pcie_switch: int = 1) -> Fabric:
    """Build the Lingjun cluster: hosts -> ToR (PSW, ASW) -> PSW Aggs -> DSW cores.

    Each GPU's NIC has one ACCESS link pair to its host's ToR carrying ``ports_per_nic`` x
    ``port_speed`` (with ``gpus_per_pcie_switch = k > 1`` every ``k`` GPUs of a host share
    one PCIe switch and its NIC: :func:`~hpnsim.fabrics.assembly.add_hosts`). ``agg_uplinks`` (per Agg, default: as many as the cores' ports allow, at
    most one per ToR below it) go to the core of the Agg's index.

    >>> f = from_lingjun()
    >>> f.n_gpus, f.meta["active_hosts"], f.meta["tiers"]["tor"]["switches"]
    (6776, 847, 119)
    """
    gpus_per_host = positive_int(gpus_per_host, "gpus_per_host")
    nics = pcie_nics_per_host(gpus_per_host, gpus_per_pcie_switch, "gpus_per_host")
    k = gpus_per_host // nics
    ports_per_nic = positive_int(ports_per_nic, "ports_per_nic")
    tor_uplinks = positive_int(tor_uplinks, "tor_uplinks")
    aggs = positive_int(aggs_per_psw, "aggs_per_psw")
    nic_bw = ports_per_nic * parse_bandwidth(port_speed, "port_speed")
    port = parse_bandwidth(port_speed, "port_speed")
    up = parse_bandwidth(uplink_speed, "uplink_speed")
    chip_bw = parse_bandwidth(chip, "chip")
    speeds = common_speeds(nvlink, pcie, hop_latency, host_latency)
    if tor_uplinks % aggs:
        raise InputError("tor_uplinks", f"must be a multiple of aggs_per_psw={aggs}, "
                                        f"got {tor_uplinks}")
    host_psw, host_tor, psw_names, tor_names = read_lingjun(path)
    n_psw, n_tor = len(psw_names), len(tor_names)
    hosts_per_tor = np.bincount(host_tor, minlength=n_tor)
    tor_psw = np.zeros(n_tor, dtype=np.int32)
    tor_psw[host_tor] = host_psw
    tors_per_psw = np.bincount(tor_psw, minlength=n_psw)
    core_ports = int(chip_bw // up)
    if agg_uplinks is None:
        agg_uplinks = max(1, min(int(tors_per_psw.max()) * tor_uplinks // aggs,
                                 core_ports // n_psw))
    agg_uplinks = positive_int(agg_uplinks, "agg_uplinks")
    per_pair = tor_uplinks // aggs
    max_host_ports = int(hosts_per_tor.max()) * nics * ports_per_nic
    check_ports("ToR", "port_speed", chip_bw, down=(max_host_ports, port),
                up=(tor_uplinks, up))
    agg_down = int(tors_per_psw.max()) * per_pair
    check_ports("Agg", "aggs_per_psw", chip_bw, down=(agg_down, up), up=(agg_uplinks, up))
    check_ports("core", "agg_uplinks", chip_bw, down=(n_psw * agg_uplinks, up))

    asm = Assembly()
    tor_index = host_tor - np.searchsorted(tor_psw, host_psw)  # ToR index within its PSW
    gpu, nic = add_hosts(asm, host_psw, tor_index, gpus_per_host, nvlink=speeds["nvlink"],
                         pcie=speeds["pcie"], latency=speeds["host_latency"],
                         gpus_per_switch=k)
    lat = speeds["hop_latency"]
    tor = asm.nodes(NodeKind.TOR, n_tor, tier=1, pod=tor_psw,
                    segment=np.arange(n_tor) - np.searchsorted(tor_psw, tor_psw))
    asm.cables(nic[::k], tor[np.repeat(host_tor, gpus_per_host)][::k], nic_bw, lat,
               LinkKind.ACCESS, port=0)
    a = np.arange(n_psw * aggs, dtype=np.int32)
    agg = asm.nodes(NodeKind.AGG, len(a), tier=2, pod=a // aggs, index=a % aggs)
    slots = np.arange(tor_uplinks, dtype=np.int32) // per_pair
    asm.cables(np.repeat(tor, tor_uplinks), (agg[0] + tor_psw[:, None] * aggs + slots).ravel(),
               up, lat, LinkKind.UPLINK)
    core = asm.nodes(NodeKind.CORE, aggs, tier=3, index=np.arange(aggs))
    asm.cables(np.repeat(agg, agg_uplinks), np.repeat(core[a % aggs], agg_uplinks), up, lat,
               LinkKind.CORE)
    n_hosts = len(host_tor)
    meta = {
        "template": "lingjun", "path": str(path), "gpus_per_host": gpus_per_host,
        "pods": n_psw, "segments": n_tor, "active_hosts": n_hosts, "backup_hosts": 0,
        "rail_optimized": False, "planes": 1, "ports_per_nic": ports_per_nic, "nic_bandwidth": nic_bw,
        "psw_names": psw_names, "tor_names": tor_names,
        "tiers": {
            "tor": dict(tier_plan(n_tor, chip_bw, down=(max_host_ports, port),
                                  up=(tor_uplinks, up)),
                        total_down_ports=n_hosts * nics * ports_per_nic),
            "agg": dict(tier_plan(len(agg), chip_bw, down=(agg_down, up), up=(agg_uplinks, up)),
                        total_down_ports=n_tor * tor_uplinks),
            "core": tier_plan(aggs, chip_bw, down=(n_psw * agg_uplinks, up)),
        },
        "uplinks_built": {"tor": True, "agg": True},
    }
    if k > 1:
        meta["gpus_per_pcie_switch"] = k
    return asm.finish(gpu, nic, meta)
