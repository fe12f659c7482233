"""Tables and a figure of reliability economics: ToR designs (and switch kinds) side by side.

Inputs are the dicts of :class:`hpnsim.faults.reliability.ReliabilityResult` (``to_dict()``)
and of :func:`hpnsim.faults.montecarlo.monte_carlo`.
"""

from __future__ import annotations

from pathlib import Path


def _label(result: dict) -> str:
    return result["design"] + ("" if result["switch"] == "single-chip" else " (chassis)")


def _rate(x: float) -> str:
    return f"{x:.3g}" if x else "0"


def reliability_rows(result: dict) -> list[tuple[str, str]]:
    """(label, value) rows of one expected result.

    Examples
    --------
    >>> from hpnsim.fabrics import hpn7
    >>> from hpnsim.faults.reliability import (CheckpointPolicy, Conditions, FailureRates,
    ...     expected_reliability, job_exposure)
    >>> e = job_exposure(hpn7(segments=1, hosts_per_segment=16, dual_tor="single"), 128)
    >>> r = expected_reliability(e, Conditions(FailureRates(), CheckpointPolicy(), 2.0))
    >>> dict(reliability_rows(r.to_dict()))["interruptions / month"]
    '0.077'
    """
    c = result["exposure"]
    policy = result["inputs"]["policy"]
    return [
        ("GPUs (hosts)", f"{c['gpus']:,} ({c['hosts']:,})"),
        ("access links, ToRs", f"{c['access_links']:,}, {c['tors']:,}"),
        ("Aggs, ToR uplinks, core links", f"{c['aggs']:,}, {c['tor_uplinks']:,}, "
                                          f"{c['core_links']:,}"),
        ("interruptions / month", _rate(result["interruptions_per_month"])),
        ("  from access links", _rate(result["interruptions_from_links"])),
        ("  from ToRs", _rate(result["interruptions_from_tors"])),
        ("mean months between interruptions",
         f"{1 / result['interruptions_per_month']:,.3g}" if result["interruptions_per_month"]
         else "never"),
        ("GPU-h lost / interruption",
         f"{(policy['interval_s'] / 2 + policy['detection_s'] + policy['restart_s']) / 3600 * c['gpus']:,.0f}"),
        ("GPU-h lost / month (rollback + restart)",
         f"{result['rollback_restart_gpu_hours_per_month']:,.1f}"),
        ("GPU-h / month writing checkpoints", f"{result['checkpoint_gpu_hours_per_month']:,.1f}"),
        ("GPU-h lost / month (total)", f"{result['lost_gpu_hours_per_month']:,.1f}"),
        ("cost / month", "(give --gpu-hour-price)" if result["cost_per_month"] is None
         else f"{result['cost_per_month']:,.0f}"),
        ("NIC-hours at half bandwidth / month", f"{result['degraded_nic_hours_per_month']:.3g}"),
        ("Agg failures / month (ECMP, no stop)", _rate(result["agg_failures_per_month"])),
        ("uplink failures / month (no stop)", _rate(result["uplink_failures_per_month"])),
    ]


def reliability_table(results: list[dict], title: str):
    """One column per design (and switch kind), one row per figure.

    >>> reliability_table([], "none").title
    'none'
    """
    from rich.table import Table

    table = Table(title=title)
    table.add_column("")
    for result in results:
        table.add_column(_label(result), justify="right")
    columns = [reliability_rows(r) for r in results]
    for i, (label, _) in enumerate(columns[0] if columns else []):
        table.add_row(label, *(col[i][1] for col in columns))
    return table


def monte_carlo_table(runs: list[dict], title: str):
    """Monthly spread (mean, p5, p50, p95) of interruptions and lost GPU-hours per run,
    with the closed-form mean beside it.

    >>> monte_carlo_table([], "mc").columns[0].header
    'design'
    """
    from rich.table import Table

    table = Table(title=title)
    for column in ("design", "figure / month", "expected", "MC mean", "p5", "p50", "p95"):
        table.add_column(column, justify="left" if column in ("design", "figure / month")
                         else "right")
    for run in runs:
        exp = run["expected"]
        for key, name, fmt in (("interruptions_per_month", "interruptions", "{:.3g}"),
                               ("lost_gpu_hours_per_month", "GPU-h lost", "{:,.0f}")):
            s = run[key]
            table.add_row(_label(run), name, fmt.format(exp[key]),
                          *(fmt.format(s[k]) for k in ("mean", "p5", "p50", "p95")))
    return table


def plot_reliability(results: list[dict], path: str | Path, title: str = "") -> Path:
    """Bars of interruptions and lost GPU-hours per month for each design (log scale for
    interruptions: dual ToR is orders of magnitude below single).

    >>> import tempfile, os
    >>> from hpnsim.faults.reliability import CheckpointPolicy, Conditions, FailureRates
    >>> from hpnsim.faults.reliability import compare_designs
    >>> rs = compare_designs("hpn7", {}, 1024, Conditions(FailureRates(), CheckpointPolicy(),
    ...                      2.0, stacked_pair_loss=0.5))
    >>> out = plot_reliability([r.to_dict() for r in rs], os.path.join(tempfile.mkdtemp(), "r.png"))
    >>> out.stat().st_size > 0
    True
    """
    from hpnsim.report.canvas import save, subplots

    fig, (left, right) = subplots(1, 2, figsize=(10, 4))
    labels = [_label(r) for r in results]
    rates = [max(r["interruptions_per_month"], 1e-12) for r in results]
    left.bar(labels, rates, color="#4c72b0")
    left.set_yscale("log")
    left.set_ylabel("job interruptions per month")
    rollback = [r["rollback_restart_gpu_hours_per_month"] for r in results]
    writing = [r["checkpoint_gpu_hours_per_month"] for r in results]
    right.bar(labels, writing, color="#bbbbbb", label="writing checkpoints")
    right.bar(labels, rollback, bottom=writing, color="#c44e52", label="rollback + restart")
    right.set_ylabel("GPU-hours lost per month")
    right.legend()
    for ax in (left, right):
        ax.tick_params(axis="x", rotation=20)
    fig.suptitle(title)
    fig.tight_layout()
    return save(fig, path, dpi=120)
