"""Plain-text tables: nccl-tests-style collective sweeps, traffic volumes, AICB workloads.

These keep fixed-width columns (no rich boxes) so they read like the tools they mirror
(nccl-tests, the reference article) and diff cleanly; each function returns the text.
"""

from __future__ import annotations

#: nccl-tests columns "redop" and "root" per operation
_REDOP = {"allreduce": "sum", "reducescatter": "sum", "reduce": "sum"}
#: nccl-tests default type: float
ELEMENT_BYTES = 4
_DECIMAL_UNITS = (("EB", 1e18), ("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3))


def decimal_bytes(value: float) -> str:
    """Decimal bytes, as the article prints them (1 PB = 1e15 B).

    Examples
    --------
    >>> decimal_bytes(2.5e15), decimal_bytes(12)
    ('2.5 PB', '12 B')
    """
    for unit, scale in _DECIMAL_UNITS:
        if abs(value) >= scale:
            return f"{value / scale:,.1f} {unit}"
    return f"{value:.0f} B"


def _pb(value: float) -> str:
    return f"{value / 1e15:,.1f} PB"


def _balance(result, tier: str) -> str:
    summary = getattr(result, "port_imbalance", {}).get(tier)
    if not summary or not summary["devices"]:
        return "-"
    worst = summary["max"]
    return "inf" if worst == float("inf") else f"{worst:.2f}"


def _receive_at_least_3(result) -> str:
    from hpnsim.routing.imbalance import at_least

    summary = getattr(result, "port_imbalance", {}).get("nic_receive")
    return str(at_least(summary)) if summary else "-"


def collective_table(results, root: int) -> str:
    """nccl-tests-style text table plus our columns and the average bus bandwidth line.

    Our columns: ``maxload`` most flows on one network link, ``collis`` hash collisions,
    ``txbal`` / ``rxbal`` the worst NIC's ``max / min`` bytes over its two send (NIC->ToR)
    / receive (ToR->NIC) ports, ``rx>=3`` how many NICs receive 3x or more on one port than
    the other (idle port included), then the bottleneck link.

    ``results`` are :class:`~hpnsim.collectives.CollectiveResult` objects, one per size.

    Examples
    --------
    >>> from hpnsim.collectives import run_collective
    >>> from hpnsim.fabrics import fat_tree
    >>> r = run_collective(fat_tree(4), "allreduce", list(range(16)), 2**20)
    >>> collective_table([r], 0).splitlines()[2].split()[:4]
    ['1048576', '262144', 'float', 'sum']
    """
    head = (f"#{'size':>12} {'count':>12} {'type':>6} {'redop':>6} {'root':>5} "
            f"{'time(us)':>10} {'algbw':>8} {'busbw':>8} {'algo':>5} {'proto':>6} "
            f"{'maxload':>7} {'collis':>6} {'txbal':>5} {'rxbal':>5} {'rx>=3':>5}  bottleneck")
    unit = (f"#{'(B)':>12} {'(elements)':>12} {'':>6} {'':>6} {'':>5} {'':>10} "
            f"{'(GB/s)':>8} {'(GB/s)':>8}")
    lines = [head, unit]
    for r in results:
        redop = _REDOP.get(r.op, "none")
        root_col = root if r.op in ("broadcast", "reduce") else -1
        lines.append(
            f" {int(r.size):>12d} {int(r.size) // ELEMENT_BYTES:>12d} {'float':>6} "
            f"{redop:>6} {root_col:>5d} {r.time * 1e6:>10.1f} {r.algbw / 1e9:>8.2f} "
            f"{r.busbw / 1e9:>8.2f} {r.algo:>5} {r.protocol:>6} {r.max_link_flows:>7.0f} "
            f"{r.hash_collisions:>6d} {_balance(r, 'nic_send'):>5} "
            f"{_balance(r, 'nic_receive'):>5} {_receive_at_least_3(r):>5}  {r.bottleneck}")
    avg = sum(r.busbw for r in results) / len(results) / 1e9 if results else 0.0
    lines.append(f"# Avg bus bandwidth    : {avg:.3f} ")
    return "\n".join(lines)


def rail_table(run) -> str:
    """Per-rail bus bandwidth of a ``per_rail`` collective (a
    :class:`~hpnsim.results.CollectiveRun` with ``groups``), one row per size: the slowest
    rail (what the table above shows) and every rail's busbw in GB/s.

    >>> from types import SimpleNamespace as S
    >>> rails = [S(name="c/rail0", results=[S(size=1024.0, busbw=2e9)]),
    ...          S(name="c/rail1", results=[S(size=1024.0, busbw=1e9)])]
    >>> print(rail_table(S(groups=rails)))
    # per rail busbw (GB/s), all rails run together
    #        size  slowest    rail0    rail1
             1024     1.00     2.00     1.00
    """
    names = [g.name.rsplit("/", 1)[-1] for g in run.groups]
    lines = ["# per rail busbw (GB/s), all rails run together",
             f"#{'size':>12} {'slowest':>8} " + " ".join(f"{n:>8}" for n in names)]
    for k, first in enumerate(run.groups[0].results):
        bws = [g.results[k].busbw / 1e9 for g in run.groups]
        lines.append(f" {int(first.size):>12d} {min(bws):>8.2f} "
                     + " ".join(f"{b:>8.2f}" for b in bws))
    return "\n".join(lines)


def article_text(spec, inputs, table: dict, three_d, gpus: int) -> str:
    """The reference article's per-epoch table (``hpnsim traffic --article``).

    ``inputs``, ``table`` and ``three_d`` come from :mod:`hpnsim.workloads.article`
    (``article_inputs``, ``article_table`` and ``article_3d`` or None).
    """
    from hpnsim.workloads import article

    lines = [f"{spec.name} under the article's formulas: P={inputs.parameters:.4g}, "
             f"T={inputs.tokens:.4g} tokens, L={inputs.layers}, H={inputs.hidden}, "
             f"N={inputs.batches:,.0f} mini-batches, G={gpus}  (per epoch, 1 PB = 1e15 B)",
             f"{'mode':<6}{'pattern':<26}{'backward':>14}{'syncs':>8}{'forward':>14}"
             f"{'passes':>12}"]
    for line in list(table.values()) + ([three_d] if three_d is not None else []):
        syncs = "-" if line.backward_syncs != line.backward_syncs else f"{line.backward_syncs:g}"
        passes = "-" if line.forward_passes != line.forward_passes else f"{line.forward_passes:.4g}"
        lines.append(f"{line.mode:<6}{line.pattern:<26}{_pb(line.backward_bytes):>14}"
                     f"{syncs:>8}{_pb(line.forward_bytes):>14}{passes:>12}")
    tp_line = table["tp"]
    mixed = 2**20 * 1e9
    lines.append(f"note: the article prints TP as {tp_line.backward_bytes / mixed:,.0f} / "
                 f"{tp_line.forward_bytes / mixed:,.0f}, i.e. bytes / (2^20 * 1e9), not PB")
    if three_d is not None:
        days = article.switch_days(three_d.total_bytes)
        lines.append(f"3d total {decimal_bytes(three_d.total_bytes)} per epoch; one 51.2 Tbps "
                     f"switch at full load: {days['as_bits_per_second']:.0f} days "
                     f"({days['as_bytes_per_second']:.1f} days if 51.2T were bytes/s)")
    return "\n".join(lines)


def traffic_text(spec, layout, report, algorithm: str) -> str:
    """Bytes per collective row, per dimension and in total (``hpnsim traffic``).

    ``report`` is the :class:`~hpnsim.workloads.traffic.TrafficReport` of ``layout``.
    """
    lay = layout
    lines = [f"{spec.name}: TP{lay.tp} x CP{lay.cp} x PP{lay.pp} x DP{lay.dp} (EP{lay.ep}, "
             f"ZeRO-{lay.zero}) on {lay.n_gpus} GPUs, {lay.num_microbatches} micro-batches of "
             f"{lay.micro_batch} x {report.seq_len} tokens, {algorithm} collectives; "
             f"{report.iterations_per_epoch:,.0f} iterations per epoch",
             f"{'dim':<5}{'phase':<10}{'op':<15}{'group':>6}{'buffer':>12}{'calls':>8}"
             f"{'per GPU':>12}{'all GPUs':>12}{'network':>9}"]
    for row in report.collectives:
        lines.append(f"{row.dimension:<5}{row.phase:<10}{row.op:<15}{row.group_size:>6}"
                     f"{decimal_bytes(row.buffer_bytes):>12}{row.calls_per_iteration:>8}"
                     f"{decimal_bytes(row.bytes_per_gpu):>12}"
                     f"{decimal_bytes(row.total_bytes):>12}{row.network_fraction:>9.0%}")
    lines.append("per iteration / per epoch (all GPUs):")
    for dim, d in report.by_dimension().items():
        lines.append(f"  {dim:<5}{decimal_bytes(d['total_bytes']):>12} / "
                     f"{decimal_bytes(d['per_epoch_bytes']):>12}"
                     f"   network {decimal_bytes(d['network_bytes'])} per iteration")
    lines.append(f"  total{decimal_bytes(report.total_bytes):>12} / "
                 f"{decimal_bytes(report.per_epoch_bytes):>12}")
    return "\n".join(lines)


def aicb_text(path, work) -> str:
    """Summary of a parsed SimAI/AICB workload: shape, then compute and bytes per phase."""
    from hpnsim.workloads.aicb import PHASES

    lines = [f"{path}: {work.policy}, TP{work.tp} x PP{work.pp} x DP{work.dp} (EP{work.ep}, "
             f"vpp {work.vpp}, ga {work.ga}, {work.all_gpus} GPUs), {len(work.layers)} layers"]
    for phase in PHASES:
        lines.append(f"  {phase:<12} compute {work.compute_time(phase) * 1e3:9.3f} ms   "
                     + "   ".join(f"{g} {decimal_bytes(work.comm_bytes(g, phase))}"
                                  for g in ("tp", "dp", "ep", "edp")
                                  if work.comm_bytes(g, phase) > 0))
    return "\n".join(lines)
