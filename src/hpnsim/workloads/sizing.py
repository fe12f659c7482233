"""Sizing a fabric for a job: how many segments or pods a template needs for N GPUs.

Without sizing options a template is trimmed to the building blocks a job needs (HPN 7.0 by
1,024-GPU segments, DCN+ by 512-GPU pods) up to ``DEFAULT_MAX_GPUS``; with them (``--pods``,
``--gpus``, ...) the fabric is what they say, checked to hold the job.

>>> fabric_for_job("hpn7", 1500).n_gpus
2048
"""

from __future__ import annotations

import math

from hpnsim.errors import InputError

#: GPUs in one building block of each template, used to size a fabric for a job
_BLOCK = {"hpn7": 1024, "dcn_plus": 512}
#: the most GPUs a template is sized to when no option sizes it: one HPN 7.0 pod (the
#: published 15,360-GPU design; more pods add a core tier) and DCN+ at the same scale (the
#: fabric it is compared at). A larger job must ask for a larger fabric (--pods, --gpus).
DEFAULT_MAX_GPUS = {"hpn7": 15360, "dcn_plus": 15360}
#: builder options that size a fabric
_SIZING = ("gpus", "pods", "segments", "last_pod_segments", "hosts_per_segment", "k")


def _grow_hint(template: str, n_gpus: int, options: dict) -> str:
    """How to ask for a fabric of at least ``n_gpus``: ``--pods P (G GPUs) or --gpus N``."""
    from hpnsim.fabrics.registry import planned_gpus, template_parameters

    hints = []
    keep = {k: v for k, v in options.items() if k not in ("gpus", "pods", "last_pod_segments")}
    if "pods" in template_parameters(template):
        try:
            pods = math.ceil(n_gpus / planned_gpus(template, {**keep, "pods": 1}))
            hints.append(f"--pods {pods} ({planned_gpus(template, {**keep, 'pods': pods}):,} "
                         f"GPUs)")
        except InputError:
            pass   # no pod count fits: --gpus says why
    return " or ".join([*hints, f"--gpus {n_gpus}"])


def check_fabric_for_job(template: str, n_gpus: int, options: dict | None = None,
                         note=None, size_field: str = "fabric") -> dict:
    """The builder options :func:`fabric_for_job` uses, checked without building anything.

    Without sizing options a template is sized to the job, up to ``DEFAULT_MAX_GPUS`` (one
    HPN pod); a larger job raises :class:`InputError` saying how to ask for more. With
    sizing options (``--pods``, ``--gpus``, ...) the fabric is what they say; it must hold
    the job, and ``note`` (a callable taking a message) hears when it is larger than the
    template without them. A job too large is refused by ``size_field``: the input that
    made it large (``"dp"``, ``"jobs[0].dp"``), which the caller knows.

    >>> check_fabric_for_job("hpn7", 32768)
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: fabric: the job needs 32,768 GPUs but hpn7 is sized up to 15,360 GPUs (one pod of 15 segments) unless told otherwise; ask for more with --pods 3 (46,080 GPUs) or --gpus 32768
    >>> check_fabric_for_job("hpn7", 32768, {"pods": "3"}, note=print)
    fabric: hpn7 with --pods 3 holds 46,080 GPUs (without sizing options: up to 15,360); the job uses 32,768
    {'pods': '3'}
    """
    from hpnsim.fabrics.registry import planned_gpus

    options = dict(options or {})
    given = [k for k in options if k.replace("-", "_") in _SIZING]
    if not given:
        limit = DEFAULT_MAX_GPUS.get(template)
        if limit is None:
            limit = planned_gpus(template, options)
        if n_gpus > limit:
            unit = " (one pod of 15 segments)" if template == "hpn7" else ""
            raise InputError(size_field, f"the job needs {n_gpus:,} GPUs but {template} is sized "
                                       f"up to {limit:,} GPUs{unit} unless told otherwise; ask "
                                       f"for more with {_grow_hint(template, n_gpus, options)}")
        return _sized_for(template, n_gpus, options)
    have = planned_gpus(template, options)
    flags = " ".join(f"--{k.replace('_', '-')} {options[k]}" for k in given)
    if have < n_gpus:
        raise InputError(size_field, f"the job needs {n_gpus:,} GPUs but {template} with {flags} "
                                   f"holds {have:,}; ask for more with "
                                   f"{_grow_hint(template, n_gpus, options)}")
    default = DEFAULT_MAX_GPUS.get(template)
    if default is None:
        try:
            default = planned_gpus(template, {k: v for k, v in options.items() if k not in given})
        except InputError:   # the template needs a size (fat_tree's k)
            default = have
    if note is not None and have > default:
        note(f"fabric: {template} with {flags} holds {have:,} GPUs (without sizing options: "
             f"up to {default:,}); the job uses {n_gpus:,}")
    return options


def _sized_for(template: str, n_gpus: int, options: dict) -> dict:
    """Options that trim ``template`` to the blocks a job needs (no sizing option given)."""
    options = dict(options)
    if template in _BLOCK:
        block = _BLOCK[template]
        blocks = math.ceil(n_gpus / block)
        if template == "hpn7":
            if n_gpus < block:
                options.update(segments=1, hosts_per_segment=max(1, math.ceil(n_gpus / 8)))
            else:
                options.update(segments=blocks)
        else:
            hosts = 16 if n_gpus >= 128 else max(1, math.ceil(n_gpus / 8))
            segments = 4 if n_gpus >= 512 else max(1, math.ceil(n_gpus / (8 * hosts)))
            options.update(pods=max(1, blocks), segments=segments, hosts_per_segment=hosts)
    return options


def fabric_for_job(template: str, n_gpus: int, options: dict | None = None, gpu=None,
                   note=None):
    """Build ``template`` large enough for ``n_gpus`` unless ``options`` give its size.

    hpn7 grows by 1,024-GPU segments up to one pod (15 segments); dcn_plus by 512-GPU pods
    up to the same 15,360 GPUs; a larger job raises :class:`InputError` unless sizing
    options (``pods``, ``gpus``, ...) ask for a fabric that holds it (then ``note`` hears
    of it: see :func:`check_fabric_for_job`). A job smaller than one block gets a block
    trimmed to its hosts. Other templates and any explicit size options are passed through
    to the builder unchanged. ``gpu`` (a name or
    :class:`~hpnsim.workloads.gpus.GPUSpec`) gives the hosts that GPU's NVLink unless
    ``options`` set ``nvlink``: an H100 job gets 900 GB/s, an H800 job 400 GB/s.

    Examples
    --------
    >>> fabric_for_job("hpn7", 2048).n_gpus
    2048
    >>> fabric_for_job("dcn_plus", 64).n_gpus
    64
    >>> f = fabric_for_job("hpn7", 16, gpu="h100")
    >>> from hpnsim.fabrics import LinkKind
    >>> float(f.link_capacity[f.link_kind == LinkKind.NVLINK].max()) / 1e9   # per direction
    450.0
    """
    from hpnsim.fabrics import build_fabric
    from hpnsim.workloads.gpus import get_gpu

    options = dict(options or {})
    if gpu is not None and "nvlink" not in options:
        options["nvlink"] = f"{get_gpu(gpu).nvlink_bandwidth / 1e9:g}GB/s"
    options = check_fabric_for_job(template, n_gpus, options, note)
    fabric = build_fabric(template, options)
    if fabric.n_gpus < n_gpus:
        raise InputError("fabric", f"{template} with {options} has {fabric.n_gpus} GPUs; the "
                                   f"job needs {n_gpus}")
    return fabric
