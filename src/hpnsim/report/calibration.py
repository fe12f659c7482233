"""Text of ``hpnsim calibrate``: the fitted parameters and the residuals per size."""

from __future__ import annotations

from hpnsim.units import format_bytes


def _error(predicted, measured) -> str:
    return "-" if predicted is None else f"{100.0 * (predicted / measured - 1.0):+.1f}%"


def calibration_text(calibration) -> str:
    """Fitted and held parameters, then one row per measured size: measured, closed-form
    and simulated time (µs) and their errors; then the RMS errors.

    >>> from types import SimpleNamespace
    >>> c = SimpleNamespace(fitted={"latency_scale": 1.2}, held={"nvls_efficiency": "no NVLS"},
    ...     rows=[{"log": "a.log", "line": 30, "op": "allreduce", "gpus": 8, "size": 1024.0,
    ...            "measured": 1e-5, "closed_form": 1.01e-5, "simulated": None}],
    ...     rms_error=lambda column="closed_form": 0.01 if column == "closed_form" else 0.0)
    >>> print(calibration_text(c))      # doctest: +NORMALIZE_WHITESPACE
    # fitted: latency_scale = 1.2
    # held: nvls_efficiency (no NVLS)
    # log    line  op             gpus       size  measured(us)  closed(us)   error  simulated(us)   error
      a.log    30  allreduce         8   1.00 KiB         10.00       10.10   +1.0%              -       -
    # rms error: closed form 1.00%
    """
    out = ["# fitted: " + (", ".join(f"{k} = {v:.4g}" for k, v in calibration.fitted.items())
                           or "nothing (no parameter is identifiable from these logs)")]
    for name, why in calibration.held.items():
        out.append(f"# held: {name} ({why})")
    width = max([len(str(r["log"])) for r in calibration.rows] + [3])
    out.append(f"# {'log':<{width}}  line  {'op':<13}  gpus  {'size':>9}  measured(us)  "
               f"closed(us)   error  simulated(us)   error")
    for r in calibration.rows:
        sim = r["simulated"]
        out.append(f"  {str(r['log']):<{width}}  {r['line'] or '-':>4}  {r['op']:<13}  "
                   f"{r['gpus']:>4}  {format_bytes(r['size']):>9}  {r['measured'] * 1e6:>12.2f}  "
                   f"{r['closed_form'] * 1e6:>10.2f}  {_error(r['closed_form'], r['measured']):>6}  "
                   f"{'-' if sim is None else f'{sim * 1e6:.2f}':>13}  "
                   f"{_error(sim, r['measured']):>6}")
    rms = f"# rms error: closed form {100 * calibration.rms_error('closed_form'):.2f}%"
    if any(r["simulated"] is not None for r in calibration.rows):
        rms += f", simulation {100 * calibration.rms_error('simulated'):.2f}%"
    out.append(rms)
    return "\n".join(out)
