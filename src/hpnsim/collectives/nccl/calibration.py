"""A calibration: what :func:`~hpnsim.collectives.nccl.calibrate.calibrate` found
(:class:`Calibration`) and its file.

The file :func:`write_calibration` writes is YAML: ``nccl:`` (every parameter, as
:meth:`~hpnsim.collectives.nccl.params.NcclParams.from_dict` reads it back), ``fitted:``, ``held:``
(reasons), ``logs:``, ``residuals:``; :func:`load_calibration` reads it for
``--calibration FILE`` and a scenario's ``calibration:`` key.

Examples
--------
>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "calib.yaml")
>>> write_calibration(Calibration(NcclParams(latency_scale=1.5), {}, {}), path)
>>> load_calibration(path).latency_scale
1.5
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from hpnsim.collectives.nccl.params import NcclParams
from hpnsim.errors import InputError, read_user_text

__all__ = ["Calibration", "load_calibration", "write_calibration"]


@dataclass
class Calibration:
    """Outcome of :func:`~hpnsim.collectives.nccl.calibrate.calibrate`.

    Attributes
    ----------
    nccl : NcclParams
        The base parameters with the fitted ones replaced.
    fitted : dict
        Fitted parameter -> value.
    held : dict
        Parameter left at its base value -> why (not asked for, not identifiable).
    rows : list of dict
        One residual row per measured size (``measured``, ``closed_form``, ``simulated``
        seconds; errors are predicted/measured - 1).
    sources : list of dict
        One row per log (file, op, GPUs, algorithm, protocol, sizes).
    cost : float
        Least-squares cost of the fit (half the sum of squared log residuals).

    Examples
    --------
    >>> c = Calibration(NcclParams(), {}, {}, rows=[{"measured": 1.0, "closed_form": 1.1}])
    >>> round(c.rms_error(), 6), c.rms_error("simulated")
    (0.1, 0.0)
    """

    nccl: NcclParams
    fitted: dict[str, float]
    held: dict[str, str]
    rows: list[dict] = field(default_factory=list)
    sources: list[dict] = field(default_factory=list)
    cost: float = 0.0

    def rms_error(self, column: str = "closed_form") -> float:
        """Root mean square of log(predicted/measured) over the rows of ``column``
        (``closed_form`` or ``simulated``), as a relative error (0 without rows).

        Examples
        --------
        >>> rows = [{"measured": 1.0, "closed_form": 1.1}, {"measured": 2.0, "closed_form": 2.2}]
        >>> round(Calibration(NcclParams(), {}, {}, rows).rms_error(), 6)
        0.1
        """
        errors = [math.log(r[column] / r["measured"]) for r in self.rows
                  if r.get(column) is not None]
        return math.expm1(math.sqrt(sum(x * x for x in errors) / len(errors))) if errors \
            else 0.0

    def to_dict(self) -> dict:
        """The calibration file's content (SI units; residual errors as fractions).

        Examples
        --------
        >>> d = Calibration(NcclParams(eff_ll=0.4), {"eff_ll": 0.4}, {}).to_dict()
        >>> d["nccl"]["eff_ll"], d["fitted"], d["rms_error"]
        (0.4, {'eff_ll': 0.4}, {'closed_form': 0.0, 'simulated': 0.0})
        """
        return {"nccl": {k: v for k, v in self.nccl.to_dict().items()},
                "fitted": dict(self.fitted), "held": dict(self.held), "logs": self.sources,
                "rms_error": {"closed_form": self.rms_error("closed_form"),
                              "simulated": self.rms_error("simulated")},
                "residuals": self.rows}


def write_calibration(calibration: Calibration, path) -> None:
    """Write ``calibration`` as YAML (see the module docstring) to ``path``.

    Parameters
    ----------
    calibration : Calibration
    path : str or Path
        The file to write (replaced if it exists); :func:`load_calibration` reads it back.

    Returns
    -------
    None

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "calib.yaml")
    >>> write_calibration(Calibration(NcclParams(eff_ll=0.4), {"eff_ll": 0.4}, {}), path)
    >>> load_calibration(path).eff_ll
    0.4
    """
    import yaml

    text = ("# hpnsim calibration: NCCL parameters fitted to nccl-tests logs "
            "(hpnsim calibrate); use with --calibration FILE or a scenario's calibration: key\n")
    text += yaml.safe_dump(calibration.to_dict(), sort_keys=False)
    with open(path, "w", encoding="utf-8") as out:
        out.write(text)


def load_calibration(path, field_name: str = "calibration") -> NcclParams:
    """The :class:`NcclParams` of a calibration file (its ``nccl:`` mapping); every value is
    checked against :data:`~hpnsim.collectives.nccl.params.BOUNDS` (an efficiency below 0.05 or above 1 is refused).

    Parameters
    ----------
    path : str or Path
        A file :func:`write_calibration` (``hpnsim calibrate --out``) wrote.
    field_name : str
        The name errors carry (``calibration``: the scenario key).

    Returns
    -------
    NcclParams

    Raises
    ------
    InputError
        When the file is missing, not YAML, has no ``nccl:`` mapping or a value out of
        bounds.

    Examples
    --------
    >>> import tempfile, os
    >>> d = tempfile.mkdtemp(); p = os.path.join(d, "c.yaml")
    >>> _ = open(p, "w").write("nccl:\\n  nvlink_efficiency: 1.2\\n")
    >>> load_calibration(p)
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: calibration: ...c.yaml: nccl.nvlink_efficiency: must be in [0.05, 1.0], got 1.2
    """
    from hpnsim.errors import read_user_yaml

    text = read_user_text(path, field_name, "calibration file")
    try:
        data, _ = read_user_yaml(text, field_name)
    except InputError as exc:
        raise InputError(field_name, f"{path}: {exc.field}: {exc.message}"
                         if exc.field != field_name else f"{path}: {exc.message}") from None
    if not isinstance(data, dict) or not isinstance(data.get("nccl"), dict):
        raise InputError(field_name, f"{path}: a calibration file has an 'nccl:' mapping of "
                                     f"parameters (write one with hpnsim calibrate)")
    try:
        return NcclParams.from_dict(data["nccl"])
    except InputError as exc:
        raise InputError(field_name, f"{path}: {exc}") from None
    except TypeError as exc:
        raise InputError(field_name, f"{path}: nccl: {exc}") from None
