"""Fabric templates by name, built from string options (CLI, YAML) or sized for a GPU count."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

from hpnsim.errors import InputError
from hpnsim.fabrics.clos import dcn_plus, fat_tree, rail_only, rail_optimized
from hpnsim.fabrics.fabric import Fabric
from hpnsim.fabrics.hpn import hpn7, hpn7_derived
from hpnsim.fabrics.lingjun import from_lingjun
from hpnsim.fabrics.tiered import PLAN_ONLY, Planned

#: template name -> builder
TEMPLATES: dict[str, Callable[..., Fabric]] = {
    "hpn7": hpn7, "dcn_plus": dcn_plus, "rail_optimized": rail_optimized,
    "rail_only": rail_only, "fat_tree": fat_tree, "lingjun": from_lingjun,
}
_TRUE, _FALSE = {"true", "yes", "1", "on"}, {"false", "no", "0", "off"}


def template_parameters(template: str) -> dict[str, tuple[type, Any]]:
    """Parameters of a template: name -> (type, default); ``inspect.Parameter.empty`` if required.

    >>> template_parameters("fat_tree")["k"][0]
    <class 'int'>
    """
    builder = _builder(template)
    hints = typing.get_type_hints(builder)
    out = {}
    for name, param in inspect.signature(builder).parameters.items():
        kind = hints.get(name, str)
        args = [a for a in typing.get_args(kind) if a is not type(None)]
        out[name] = (args[0] if args else kind, param.default)
    return out


def option_default(template: str, name: str, options: dict[str, Any] | None = None) -> Any:
    """The value a template takes for ``name`` when the typed ``options`` leave it out: its
    signature's default, or for hpn7's counts the value derived from its chip and NIC.

    >>> option_default("hpn7", "segments"), option_default("hpn7", "segments", {"chip": "102.4T"})
    (15, 30)
    """
    options = options or {}
    if name in options:
        return options[name]
    default = template_parameters(template)[name][1]
    if default is None and template == "hpn7":
        derived = hpn7_derived(**{k: v for k, v in options.items()
                                  if k in ("chip", "port_speed", "ports_per_nic", "dual_tor",
                                           "peer_links", "rails", "domain_gpus")})
        return derived.get(name)
    return default


def _builder(template: str) -> Callable[..., Fabric]:
    if template not in TEMPLATES:
        raise InputError("template", f"unknown fabric {template!r}; choose from "
                                     f"{', '.join(TEMPLATES)}")
    return TEMPLATES[template]


def _convert(name: str, kind: type, value: Any) -> Any:
    if not isinstance(value, str):
        return value
    text = value.strip()
    if kind is bool:
        if text.lower() in _TRUE | _FALSE:
            return text.lower() in _TRUE
        raise InputError(name, f"must be true or false, got {value!r}")
    if kind is int:
        try:
            return int(text)
        except ValueError:
            raise InputError(name, f"must be an integer, got {value!r}") from None
    if kind is float:
        try:
            return float(text)
        except ValueError:
            raise InputError(name, f"must be a number, got {value!r}") from None
    return text


def typed_options(template: str, options: dict[str, Any]) -> dict[str, Any]:
    """Convert string options (``{"segments": "2"}``) into the builder's typed keywords.

    >>> typed_options("hpn7", {"segments": "2", "dual-plane": "false", "dual_tor": "stacked"})
    {'segments': 2, 'dual_plane': False, 'dual_tor': 'stacked'}
    """
    params = template_parameters(template)
    typed = {}
    for raw_key, value in options.items():
        key = raw_key.replace("-", "_")
        if key not in params:
            allowed = ", ".join(sorted(params))
            raise InputError(key, f"not a parameter of {template}; allowed: {allowed}")
        typed[key] = _convert(key, params[key][0], value)
    return typed


def _fill(per_segment: int, max_segments: int, gpus: int,
          partial_pod: bool = False) -> dict[str, int]:
    segments = -(-gpus // per_segment)
    if segments <= max_segments:
        return {"pods": 1, "segments": segments}
    sized = {"pods": -(-segments // max_segments), "segments": max_segments}
    if partial_pod and segments % max_segments:
        sized["last_pod_segments"] = segments % max_segments
    return sized


def size_options(template: str, gpus: int, options: dict[str, Any] | None = None) -> dict:
    """Typed options that size ``template`` for at least ``gpus`` GPUs.

    Whole segments; whole pods except for hpn7, whose last pod may hold fewer segments
    (``last_pod_segments``), so a multiple of 1,024 GPUs is built exactly. Parameters the
    caller set are kept; only the sizing parameters left free are chosen (with ``pods`` set,
    hpn7's last pod is not shortened, so fixed options may hold fewer GPUs than asked).

    >>> size_options("hpn7", 15360)
    {'pods': 1, 'segments': 15}
    >>> size_options("hpn7", 131072)
    {'pods': 9, 'segments': 15, 'last_pod_segments': 8}
    >>> size_options("dcn_plus", 16384)
    {'pods': 32, 'segments': 4}
    >>> size_options("fat_tree", 1000)
    {'k': 16}
    """
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus <= 0:
        raise InputError("gpus", f"must be a positive integer, got {gpus!r}")
    opts = typed_options(template, options or {})
    params = template_parameters(template)

    def get(name):
        return opts.get(name, params[name][1])

    if template == "hpn7":
        hosts = option_default(template, "hosts_per_segment", opts)
        per_host = get("domain_gpus") or get("rails")
        sized = _fill(hosts * per_host, option_default(template, "segments", opts), gpus,
                      partial_pod="pods" not in opts)
    elif template in ("dcn_plus", "rail_optimized"):
        per_host = get("gpus_per_host") if template == "dcn_plus" else get("rails")
        sized = _fill(get("hosts_per_segment") * per_host, opts.get("segments", params[
            "segments"][1]), gpus)
    elif template == "rail_only":
        sized = {"segments": -(-gpus // (get("hosts_per_segment") * get("rails")))}
    elif template == "fat_tree":
        k = 2
        while k ** 3 // 4 < gpus:
            k += 2
        sized = {"k": k}
    else:
        raise InputError("gpus", f"{template} is a fixed topology and cannot be sized")
    return {key: value for key, value in sized.items() if key not in opts}


def sizing_unit(template: str, options: dict[str, Any]) -> str:
    """What ``--gpus`` rounds to for ``template`` with typed ``options`` (for messages).

    >>> sizing_unit("hpn7", {})
    'whole segments of 1,024 GPUs: 128 hosts x 8 GPUs'
    >>> sizing_unit("dcn_plus", {"pods": 2})
    'whole pods of 512 GPUs: 4 segments of 16 hosts x 8 GPUs'
    """
    params = template_parameters(template)

    def get(name):
        return options.get(name, params[name][1])

    if template == "fat_tree":
        return "a k-ary fat-tree has k^3/4 GPUs, k even"
    per_host = get("gpus_per_host") if template == "dcn_plus" else get("rails")
    if template == "hpn7":
        hosts = option_default(template, "hosts_per_segment", options)
        per_host = get("domain_gpus") or per_host
        return f"whole segments of {hosts * per_host:,} GPUs: {hosts} hosts x {per_host} GPUs"
    hosts = get("hosts_per_segment")
    if template == "rail_only" or get("pods") == 1:
        return f"whole segments of {hosts * per_host:,} GPUs: {hosts} hosts x {per_host} GPUs"
    segments = get("segments")
    return (f"whole pods of {segments * hosts * per_host:,} GPUs: {segments} segments of "
            f"{hosts} hosts x {per_host} GPUs")


def sizing_note(fabric: Fabric) -> str | None:
    """A one-line note when a fabric sized by ``gpus`` does not hold exactly that many GPUs.

    >>> sizing_note(build_fabric("hpn7", {"gpus": "1000"}))
    '1,000 GPUs round up to 1,024 for hpn7 (whole segments of 1,024 GPUs: 128 hosts x 8 GPUs)'
    >>> sizing_note(build_fabric("hpn7", {"gpus": "2048"})) is None
    True
    """
    requested = fabric.meta.get("requested_gpus")
    if requested is None or requested == fabric.n_gpus:
        return None
    template = fabric.meta.get("template", "")
    options = fabric.meta.get("options", {})
    unit = sizing_unit(template, options)
    if fabric.n_gpus > requested:
        return (f"{requested:,} GPUs round up to {fabric.n_gpus:,} for {template} ({unit})")
    fixed = ", ".join(f"{k}={v}" for k, v in options.items()
                      if k in ("pods", "segments", "k") and k not in
                      fabric.meta.get("sized_options", ()))
    return (f"{requested:,} GPUs requested but {template} with {fixed or 'these options'} "
            f"holds only {fabric.n_gpus:,}")


def _too_many(template: str, gpus, typed: dict, sized: dict, error: InputError) -> str:
    """Message for a ``gpus`` request the template cannot be sized for: the largest GPU
    count it can hold with the other options (found by checks alone, nothing is built)."""
    fixed = {k: v for k, v in typed.items() if k not in sized}

    def fits(n: int) -> bool:
        token = PLAN_ONLY.set(True)
        try:
            TEMPLATES[template](**fixed, **size_options(template, n, fixed))
        except Planned:
            return True
        except InputError:
            return False
        finally:
            PLAN_ONLY.reset(token)
        return True

    low, high = 0, _convert("gpus", int, gpus)   # fits(low) (or low == 0), not fits(high)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if fits(mid) else (low, mid)
    allowed = f"must be 1..{low:,} for {template}" if low else f"{template} cannot be sized"
    needs = ", ".join(f"{k}={v}" for k, v in sized.items())
    reason = error.message.split("; ")[0]   # its advice names options the user did not set
    return f"{allowed}, got {gpus!r} (it would need {needs}: {reason})"


def planned_gpus(template: str, options: dict[str, Any] | None = None) -> int:
    """GPUs :func:`build_fabric` would give, after every check, without building the fabric
    (a templated one; a fixed topology such as lingjun is read). Raises as build_fabric does.

    >>> planned_gpus("hpn7", {"pods": "2"})
    30720
    >>> planned_gpus("hpn7", {"gpus": "17000"})
    17408
    """
    token = PLAN_ONLY.set(True)
    try:
        return build_fabric(template, options).n_gpus
    except Planned as plan:
        return plan.gpus
    finally:
        PLAN_ONLY.reset(token)


def build_fabric(template: str, options: dict[str, Any] | None = None, *,
                 meta: dict[str, Any] | None = None) -> Fabric:
    """Build a template from string (or typed) options; ``gpus`` sizes it.

    Raises InputError for an unknown template or parameter (listing the allowed ones) and
    for any value the builder rejects. The fabric's ``meta`` (read-only) holds the typed
    ``options``; with ``gpus``, ``requested_gpus`` keeps the request (the fabric may hold
    more: whole segments, pods or k; see :func:`sizing_note`); ``meta`` adds entries (a
    scenario's ``units`` table for the bill of materials).

    >>> build_fabric("hpn7", {"segments": "2", "dual-tor": "stacked"}).n_gpus
    2048
    >>> build_fabric("dcn_plus", {"gpus": "2048"}).meta["pods"]
    4
    """
    _builder(template)
    options = dict(options or {})
    gpus = options.pop("gpus", None)
    typed = typed_options(template, options)
    sized: dict[str, Any] = {}
    if gpus is not None:
        sized = size_options(template, _convert("gpus", int, gpus), typed)
        typed.update(sized)
    params = template_parameters(template)
    missing = [n for n, (_, default) in params.items()
               if default is inspect.Parameter.empty and n not in typed]
    if missing:
        raise InputError(missing[0], f"{template} needs --{missing[0].replace('_', '-')} "
                                     f"(or --gpus to size it)")
    try:
        fabric = TEMPLATES[template](**typed)
    except InputError as error:
        if error.field not in sized:
            raise
        # the builder refused a size that --gpus chose, not one the user typed: say so
        raise InputError("gpus", _too_many(template, gpus, typed, sized, error)) from None
    built: dict[str, Any] = {"options": typed}
    if gpus is not None:
        built["requested_gpus"] = _convert("gpus", int, gpus)
        built["sized_options"] = sorted(sized)
    return fabric.replace(meta={**fabric.meta, **built, **(meta or {})})
