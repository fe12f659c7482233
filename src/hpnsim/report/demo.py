"""The demo (``hpnsim demo``) on the terminal and in the HTML report (``demo.json``).

Its sections, in reading order: both fabrics' bill of materials, the all-reduce by host
generation and routing (with what decides it, :func:`allreduce_verdicts`), the iteration
per fabric, then the later parts when ``demo.json`` has them (bus bandwidth by size,
linearity, the link failure, the shared cluster). Each subject's section comes from its
module (:mod:`~hpnsim.report.fabric`, :mod:`~hpnsim.report.collective`,
:mod:`~hpnsim.report.iteration`, :mod:`~hpnsim.report.scaling`,
:mod:`~hpnsim.report.faults`, :mod:`~hpnsim.report.cluster`); the all-reduce's comparison
of HPN 7.0 and DCN+ is the demo's own.
"""

from __future__ import annotations

from hpnsim.report.cluster import cluster_section
from hpnsim.report.collective import (
    allreduce_table,
    busbw_figure,
    generations_busbw_figure,
    size_section,
)
from hpnsim.report.fabric import fabric_section, fabric_table
from hpnsim.report.faults import failure_section
from hpnsim.report.iteration import demo_iteration_section, training_table
from hpnsim.report.scaling import scaling_section
from hpnsim.report.section import Figure, Table
from hpnsim.report.style import LINK_WORDS
from hpnsim.report.transport import transport_lines, transport_section
from hpnsim.units import format_time

__all__ = ["allreduce_section", "allreduce_subtitle", "allreduce_verdicts", "demo_sections",
           "print_demo", "print_demo_extras", "print_takeaways"]


def demo_sections(demo: dict) -> list:
    """Every section of the demo's report that ``demo`` (``demo.json``) has data for, in
    reading order."""
    sections = (fabric_section(demo["fabrics"]), allreduce_section(demo),
                demo_iteration_section(demo), size_section(demo), scaling_section(demo),
                failure_section(demo), cluster_section(demo), transport_section(demo))
    return [s for s in sections if s]


def allreduce_subtitle(config: dict, rows: list[dict]) -> str:
    """What the demo's all-reduce bars share (GPU, NVLink, NIC, algorithm) and what bounds them.

    Examples
    --------
    >>> cfg = {"allreduce_gpus": 16, "allreduce_size": 2**30, "allreduce_algo": "ring",
    ...        "gpu": "h800", "hosts": {"hpn7": {"nvlink_bandwidth": 4e11,
    ...                                          "nic_bandwidth": 5e10}}}
    >>> print(allreduce_subtitle(cfg, [{"bottleneck_kind": "nvlink", "protocol": "ll128"}]))
    Held fixed: the same 16 GPUs (H800, NVLink 400 GB/s, NIC 400 Gb/s per GPU), ring (LL128).
    1 of 1 bars are NVLink-bound (hatched): their limit is inside the host, where routing has no say.
    """
    hosts = {(h["nvlink_bandwidth"], h["nic_bandwidth"])
             for h in config.get("hosts", {}).values()}
    gpu = str(config.get("gpu", "")).upper()
    if len(hosts) == 1:
        nvlink, nic = hosts.pop()
        gpu += f"{', ' if gpu else ''}NVLink {nvlink / 1e9:g} GB/s, NIC {8 * nic / 1e9:g} Gb/s per GPU"
    protocols = {str(r.get("protocol", "")).upper() for r in rows} - {""}
    algo = config["allreduce_algo"] + (f" ({protocols.pop()})" if len(protocols) == 1 else "")
    held = f"the same {config['allreduce_gpus']:,} GPUs" + (f" ({gpu})" if gpu else "")
    bound = sum(r.get("bottleneck_kind") == "nvlink" for r in rows)
    text = (f"Held fixed: {held}, {algo}.\n{bound} of {len(rows)} bars are NVLink-bound "
            "(hatched): their limit is inside the host, where routing has no say.")
    if any(r.get("routing") == "spray" for r in rows):
        text += ("\n(ideal) = per-packet spraying, no hash collisions: a reference, not a "
                 "deployed policy.")
    return text


def _find(rows: list[dict], gpu, fabric: str, routing: str,
          forced: str | None = None) -> dict | None:
    """The row of (host GPU, fabric, routing): NCCL's own algorithm, or ``forced``'s."""
    return next((r for r in rows if r.get("host_gpu") == gpu and r["fabric"] == fabric
                 and r["routing"] == routing and r.get("forced_algo") == forced), None)


def _pxn(hpn: dict | None, dcn: dict | None) -> str:
    """What a forced ring on both fabrics shows: HPN's PXN relay in NVLink sends per GPU
    (empty when the rows are missing or the sends do not differ)."""
    if not (hpn and dcn):
        return ""
    sends = (hpn.get("nvlink_sends_per_gpu"), dcn.get("nvlink_sends_per_gpu"))
    if None in sends or not sends[0] > sends[1]:
        return ""
    c = hpn["ring_channels"]
    return (f"a forced ring gives HPN {hpn['busbw']:.1f} vs DCN+ {dcn['busbw']:.1f} GB/s "
            f"(HPN {_link(hpn)}, DCN+ {_link(dcn)}), because HPN's rail-optimized ring "
            f"relays each host's cross-rail hop over NVLink (PXN): {sends[0]:g} vs "
            f"{sends[1]:g} NVLink sends per GPU over {c} ring channels ({sends[1]:g}/"
            f"{sends[0]:g} = {sends[1] / sends[0]:.3f})")


def _link(row: dict) -> str:
    kind = row.get("bottleneck_kind") or "-"
    word = LINK_WORDS.get(kind, kind).replace(" (in host)", "")
    return f"{word} {100 * row['bottleneck_utilization']:.0f}% busy"


def _hosts(cfg: dict, gpu) -> str:
    """``H800 hosts (NVLink 400 GB/s, NIC 400 Gb/s per GPU)`` from the demo's config."""
    h = cfg.get("host_generations", {}).get(gpu) or next(iter(cfg.get("hosts", {}).values()),
                                                         None)
    name = f"{str(gpu or cfg.get('gpu', '')).upper()} hosts"
    if not h:
        return name
    return (f"{name} (NVLink {h['nvlink_bandwidth'] / 1e9:g} GB/s, NIC "
            f"{8 * h['nic_bandwidth'] / 1e9:g} Gb/s per GPU)")


def allreduce_verdicts(demo: dict) -> dict:
    """Per host generation of the demo's all-reduce, what decides it, from the rows alone:
    ``{gpu: (short, line)}``, a panel title and the one-line takeaway.

    HPN under its dual-plane routing is compared with DCN+ under ECMP (each fabric as
    deployed). Both bars NVLink-bound: the limit is inside the host, and HPN's deficit is
    the ring's NVLink sends per GPU (its rail-optimized ring relays the cross-rail hop over
    NVLink, PXN). Otherwise the network decides: each bar's busiest link and DCN+'s ECMP
    hash collisions are named, and HPN under ECMP says how much of the gap is routing.

    Examples
    --------
    >>> row = {"host_gpu": "h800", "busbw": 131.1, "bottleneck_kind": "nvlink",
    ...        "bottleneck_utilization": 0.86, "hash_collisions": 0,
    ...        "nvlink_sends_per_gpu": 16.0, "ring_channels": 16}
    >>> rows = [{**row, "fabric": "hpn7", "routing": "hpn_dual_plane"},
    ...         {**row, "fabric": "dcn_plus", "routing": "ecmp", "busbw": 147.0,
    ...          "hash_collisions": 2063, "nvlink_sends_per_gpu": 14.0}]
    >>> short, line = allreduce_verdicts({"config": {}, "allreduce": rows})["h800"]
    >>> print(line)
    H800 hosts: NVLink-bound on both fabrics (HPN NVLink 86% busy, DCN+ NVLink 86% busy), so routing has no say: HPN dual-plane 131.1 vs DCN+ ECMP 147.0 GB/s (-10.8%), because HPN's rail-optimized ring relays each host's cross-rail hop over NVLink (PXN): 16 vs 14 NVLink sends per GPU over 16 ring channels (14/16 = 0.875).
    """
    rows = demo.get("allreduce") or []
    out = {}
    for gpu in dict.fromkeys(r.get("host_gpu") for r in rows):
        hpn, dcn = _find(rows, gpu, "hpn7", "hpn_dual_plane"), _find(rows, gpu, "dcn_plus",
                                                                       "ecmp")
        if not (hpn and dcn):
            continue
        name = f"{str(gpu or demo['config'].get('gpu', '')).upper()} hosts"
        if hpn.get("nvlink_bandwidth"):
            name += f" (NVLink {hpn['nvlink_bandwidth'] / 1e9:g} GB/s)"
        gain = f"{100 * (hpn['busbw'] / dcn['busbw'] - 1):+.1f}%"
        algos = dict.fromkeys(str(r.get("algo", "")) for r in (hpn, dcn)) if \
            demo["config"].get("allreduce_algo") == "auto" else {}
        picked = f", NCCL's choice: {' and '.join(a.upper() for a in algos)}" if algos else ""
        versus = (f"HPN dual-plane {hpn['busbw']:.1f} vs DCN+ ECMP {dcn['busbw']:.1f} GB/s "
                  f"({gain}{picked})")
        pxn = _pxn(_find(rows, gpu, "hpn7", "hpn_dual_plane", "ring"),
                   _find(rows, gpu, "dcn_plus", "ecmp", "ring"))
        if hpn["bottleneck_kind"] == dcn["bottleneck_kind"] == "nvlink":
            short = "NVLink-bound on both fabrics: routing has no say"
            line = (f"{name}: NVLink-bound on both fabrics (HPN {_link(hpn)}, DCN+ "
                    f"{_link(dcn)}), so routing has no say: {versus}")
            sends = (hpn.get("nvlink_sends_per_gpu"), dcn.get("nvlink_sends_per_gpu"))
            if None not in sends and sends[0] > sends[1]:
                c = hpn["ring_channels"]
                line += (", because HPN's rail-optimized ring relays each host's cross-rail "
                         f"hop over NVLink (PXN): {sends[0]:g} vs {sends[1]:g} NVLink sends "
                         f"per GPU over {c} ring channels ({sends[1]:g}/{sends[0]:g} = "
                         f"{sends[1] / sends[0]:.3f})")
                short += (f"; HPN's PXN relay: {sends[0]:g} vs {sends[1]:g} NVLink sends "
                          "per GPU")
            elif pxn:
                line += f"; {pxn}"
            out[gpu] = (short, line + ".")
            continue
        short = "the network decides"
        line = (f"{name}: the network decides: {versus}; DCN+ is bound by its {_link(dcn)} "
                f"({dcn['hash_collisions']:,} ECMP hash collisions), HPN by its {_link(hpn)} "
                f"({hpn['hash_collisions']:,} collisions)")
        ecmp = _find(rows, gpu, "hpn7", "ecmp")
        if ecmp:
            same = abs(ecmp["busbw"] / dcn["busbw"] - 1) < 0.005
            line += (f"; HPN under ECMP: {ecmp['busbw']:.1f} GB/s"
                     + (", DCN+'s figure: the gain is routing, not topology" if same else ""))
            short += (f": ECMP collisions bound DCN+ (and HPN under ECMP), dual-plane "
                      f"routing {gain}")
        if pxn:
            line += f"; {pxn}"
            short += "; a forced ring shows HPN's PXN relay"
        out[gpu] = (short, line + ".")
    return out


def allreduce_section(demo: dict):
    """The all-reduce by fabric and routing, one panel per host generation, its table."""
    rows = demo.get("allreduce") or []
    if not rows:
        return None
    cfg = demo["config"]
    algo = "NCCL's choice" if cfg["allreduce_algo"] == "auto" else cfg["allreduce_algo"]
    title = (f"{cfg['allreduce_size'] / 2**30:g} GiB all-reduce ({algo}) over the same "
             f"{cfg['allreduce_gpus']:,} GPUs: bus bandwidth by fabric and routing")
    verdicts = allreduce_verdicts(demo)
    if any(r.get("host_gpu") for r in rows):
        panels = {g: f"{_hosts(cfg, g)}:\n{verdicts[g][0]}" if g in verdicts
                  else _hosts(cfg, g) for g in dict.fromkeys(r.get("host_gpu") for r in rows)}
        fig = generations_busbw_figure(rows, title, panels)
    else:   # a demo.json from before host generations
        fig = busbw_figure(rows, title, allreduce_subtitle(cfg, rows))
    table = Table(["fabric", "routing", "algorithm", "hosts", "time", "busbw (GB/s)",
                   "hash collisions", "busiest link (busy)", "NVLink sends per GPU"],
                  [[a["fabric"], a["routing"],
                    str(a.get("algo", "")) + (" (forced)" if a.get("forced_algo") else ""),
                    str(a.get("host_gpu") or cfg.get("gpu", "")).upper(),
                    format_time(a["time"]), f"{a['busbw']:.1f}",
                    str(a["hash_collisions"]), _link(a),
                    "-" if a.get("nvlink_sends_per_gpu") is None
                    else f"{a['nvlink_sends_per_gpu']:g} of {a['ring_channels']}"]
                   for a in rows],
                  " ".join(line for _, line in verdicts.values()))
    return ("allreduce", "All-reduce by fabric and routing", [
        Figure(fig, "allreduce_busbw", "Each bar names its busiest link; hatched bars are "
               "bound inside the host (NVLink), where routing has no say. Same GPUs and NICs "
               "in both panels, the algorithm NCCL picks on those hosts (a forced ring "
               "beside it where marked); only the hosts' NVLink differs."), table])


def print_demo(result, console) -> None:
    """The demo's three tables (fabrics, all-reduce, training) and the bottleneck links."""
    cfg = result.config
    # every fabric's rows: DCN+ has a core tier and single-mode optics that HPN lacks
    console.print(fabric_table(result.fabrics, f"1. A {cfg['pod_gpus']:,}-GPU fabric: HPN 7.0 "
                                               "vs DCN+ (3-tier Clos)"))

    size = cfg["allreduce_size"] / 2**30
    for gpu in dict.fromkeys(r.get("host_gpu") for r in result.allreduce):
        rows = [r for r in result.allreduce if r.get("host_gpu") == gpu]
        nvlink = rows[0].get("nvlink_bandwidth")
        hosts = (f", {gpu.upper()} hosts" + (f" (NVLink {nvlink / 1e9:g} GB/s)" if nvlink
                                             else "")) if gpu else ""
        algo = ("NCCL's choice" if cfg['allreduce_algo'] == "auto"
                else cfg['allreduce_algo'])
        console.print(allreduce_table(rows, f"2. {size:g} GiB all-reduce ({algo}) over "
                                            f"{cfg['allreduce_gpus']:,} GPUs{hosts}"))
        for r in rows:
            forced = " (ring forced)" if r.get("forced_algo") else ""
            console.print(f"  bottleneck {r['fabric']}/{r['routing']}{forced}: "
                          f"{r['bottleneck']}", highlight=False)
    console.print(training_table(
        result.training, f"3. One {cfg['model']} iteration, TP {cfg['tp']} x PP {cfg['pp']} x "
                         f"DP {cfg['dp']} ({cfg['tp'] * cfg['pp'] * cfg['dp']:,} GPUs)"))


def print_takeaways(result, console) -> None:
    """The all-reduce's takeaway, one line per host generation (:func:`allreduce_verdicts`)."""
    verdicts = allreduce_verdicts(result.to_dict())
    if verdicts:
        console.print("Takeaway: HPN 7.0 vs DCN+ all-reduce, by host generation", style="bold")
        for _, line in verdicts.values():
            console.print(f"  {line}", highlight=False)
    lines = transport_lines(result.to_dict())
    if lines:
        console.print("Takeaway: transport and incast, as packets", style="bold")
        for line in lines:
            console.print(f"  {line}", highlight=False)
    elif not result.config.get("packet", True):
        console.print("Transport and incast (packets): skipped by --quick; run `hpnsim demo` "
                      "for them", highlight=False)


def print_demo_extras(result, console) -> None:
    """The later parts on the terminal: a line per busbw curve, linearity, failure, cluster."""
    if result.busbw_by_size:
        console.print("4. All-reduce busbw by size (GB/s; * = busiest link NVLink)",
                      style="bold")
        curves = dict.fromkeys((r.get("host_gpu") or "", r["fabric"], r["routing"])
                               for r in result.busbw_by_size)
        for key in curves:
            pts = [r for r in result.busbw_by_size
                   if (r.get("host_gpu") or "", r["fabric"], r["routing"]) == key]
            cells = "  ".join(f"{r['size'] / 2**20:g}M {r['busbw']:.1f}"
                              + ("*" if r["bottleneck_kind"] == "nvlink" else "")
                              for r in pts)
            console.print(f"  {key[0].upper():5s} {key[1]:9s} {key[2]:15s} {cells}",
                          highlight=False)
    if result.scaling:
        console.print("5. Linearity (DP grows, TP x PP fixed)", style="bold")
        for fabric in dict.fromkeys(p["fabric"] for p in result.scaling["points"]):
            pts = [p for p in result.scaling["points"] if p["fabric"] == fabric]
            console.print(f"  {fabric:9s} " + "  ".join(
                f"{p['gpus']:,} GPUs {p['linearity']:.4f}" for p in pts), highlight=False)
    if result.failure:
        f = result.failure
        console.print(f"6. {f['model']} on {f['gpus']} GPUs through {f['fault']}", style="bold")
        for d in f["designs"]:
            console.print(f"  {d['design']:28s} time lost {format_time(d['time_lost'])}, "
                          f"worst {d['worst_samples_per_s']:.1f} of "
                          f"{d['nominal_samples_per_s']:.1f} samples/s", highlight=False)
    if result.cluster:
        c = result.cluster
        console.print(f"7. Shared cluster: {len(c['jobs'])} jobs on {c['fabric']['gpus']} GPUs",
                      style="bold")
        for r in c["runs"]:
            console.print(f"  {r['scheduler']:5s} utilization {100 * r['gpu_utilization']:.2f}%"
                          f", mean JCT {format_time(r['mean_jct'])}", highlight=False)
    if result.transport:
        t = result.transport
        console.print(f"8. Rail 0 of {t['hosts']} hosts as packets (default RoCE; "
                      f"{t['gpu'].upper()}-class hosts, NVLink {t['nvlink']}: the NICs' legs "
                      "alone, so the network decides)", style="bold")
        for f in t["fabrics"]:
            top = f["ports"][0] if f["ports"] else None
            where = (f"max queue {top['q_max'] / 1e3:,.0f} KB at {top['port']}" if top
                     else "no queue")
            console.print(f"  {f['fabric']:9s} {f['routing']:15s} {format_time(f['time'])} "
                          f"(line rate {format_time(f['ideal'])}), {where}, "
                          f"{f['ecn_marks']:,} marks, {f['cnps']:,} CNPs, "
                          f"{f['pfc_pauses']:,} pauses", highlight=False)
    if result.incast:
        n = result.incast
        console.print(f"9. Incast {n['senders']}:1 with a victim flow ({n['victim']})",
                      style="bold")
        for r in n["runs"]:
            done = "never" if r["incast_time"] is None else format_time(r["incast_time"])
            console.print(f"  {r['case']:22s} incast {done}, victim "
                          f"{format_time(r['victim_time'])} (alone "
                          f"{format_time(n['victim_alone'])}), {r['pfc_pauses']:,} pauses, "
                          f"{r['cnps']:,} CNPs, {r['drops']:,} drops", highlight=False)
