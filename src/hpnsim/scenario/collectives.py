"""Collectives in a scenario: :class:`CollectiveSpec`, one nccl-tests-style sweep of one
collective over a group of GPUs, and its checks against the fabric.

The keys are the options of ``hpnsim collective``, underscores for dashes (``op``, ``gpus``,
``sizes``, ``algo``, ``protocol``, ``channels``, ``qps``, ``root``); the scenario's
``routing`` and ``seed`` apply to every collective. A collective runs alone on the fabric,
one size after the other (see :func:`hpnsim.scenario.runner.run`).

Examples
--------
>>> c = CollectiveSpec.model_validate({"op": "all-reduce", "gpus": 16, "sizes": "1M:4M"})
>>> c.op, c.group(32)[:3], c.sizes
('allreduce', [0, 1, 2], [1048576.0, 2097152.0, 4194304.0])
>>> CollectiveSpec.model_validate({"op": "alltoall", "algo": "ring"})
Traceback (most recent call last):
...
pydantic_core._pydantic_core.ValidationError: 1 validation error for CollectiveSpec
...
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from hpnsim.collectives.nccl.params import MAXCHANNELS
from hpnsim.collectives.ops import AUTO, COLLECTIVE_ALGORITHMS, OPS, PROTOCOLS
from hpnsim.errors import InputError
from hpnsim.scenario.yaml import format_path, located

#: nccl-tests' default element type is a 4-byte float: no collective moves less
ELEMENT_BYTES = 4
#: the sweep ``hpnsim collective`` runs when ``--sizes`` is not given
DEFAULT_SIZES = "1M:1G"

__all__ = ["DEFAULT_SIZES", "ELEMENT_BYTES", "CollectiveSpec", "check_collectives",
           "larger_fabric_hint", "scenario_options"]


def _as_message(func, value):
    try:
        return func(value)
    except InputError as exc:
        raise ValueError(exc.message) from None


def _parse_sizes(value: Any) -> list[float]:
    from hpnsim.units import parse_size, parse_size_range

    if isinstance(value, bool) or value is None:
        raise ValueError(f"must be a size such as 4GiB, a sweep such as 1M:4G or a list, "
                         f"got {value!r}")
    if isinstance(value, list):
        if not value:
            raise ValueError("must list at least one size, got []")
        sizes = [_as_message(lambda v: parse_size(v, "sizes"), v) for v in value]
    elif isinstance(value, int | float):
        sizes = [_as_message(lambda v: parse_size(v, "sizes"), value)]
    else:
        sizes = _as_message(lambda v: parse_size_range(v, "sizes"), value)
    if min(sizes) < ELEMENT_BYTES:
        raise ValueError(f"must be at least {ELEMENT_BYTES} bytes (one float element), "
                         f"got {value!r}")
    return sizes


#: what a file may give for ``sizes`` (validated into a list of bytes)
_SIZES_SCHEMA = {"anyOf": [{"type": "string"}, {"type": "number"},
                           {"type": "array", "items": {"type": ["string", "number"]}}]}


#: what a file may give for ``gpus`` (validated into a count or a list of indices)
_GPUS_SCHEMA = {"anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"},
                          {"type": "array", "items": {"type": ["integer", "string"]}}]}


class CollectiveSpec(BaseModel):
    """One collective of a scenario, swept over ``sizes`` (what ``hpnsim collective`` runs).

    ``gpus`` is a count (the first N GPUs of the fabric, host-major) or an explicit list of
    GPU indices in rank order, as a list or as indices and inclusive ranges in a string
    (``"0-127,1024-1151"``, :func:`~hpnsim.units.parse_index_ranges`); without it, every GPU
    of the fabric. ``sizes`` is one size
    (``4GiB``, bytes as a number), a sweep ``MIN:MAX[:FACTOR]`` (``1M:4G``: powers of two),
    a comma list or a YAML list; bare prefixes are binary, as in nccl-tests.
    """

    model_config = ConfigDict(extra="forbid")

    name: str = ""
    op: str = Field("allreduce", description=", ".join(OPS))
    gpus: Annotated[int | list[int] | None, WithJsonSchema(_GPUS_SCHEMA)] = Field(
        None, description="the first N GPUs, or GPU indices in rank order: a list or "
                          "indices and ranges such as '0-127,1024-1151' (default: all)")
    sizes: Annotated[list[float], WithJsonSchema(_SIZES_SCHEMA)] = Field(
        default=DEFAULT_SIZES, validate_default=True,
                               description="one size, MIN:MAX[:FACTOR], a comma list or a list")
    algo: str = Field(AUTO, description=f"{', '.join(COLLECTIVE_ALGORITHMS)} or {AUTO}")
    protocol: str = Field(AUTO, description=f"{', '.join(PROTOCOLS)} or {AUTO}")
    channels: Annotated[int, Field(ge=0, le=MAXCHANNELS, strict=True)] = Field(
        0, description=f"parallel rings/trees, at most NCCL's MAXCHANNELS ({MAXCHANNELS}); "
                       f"0: one per rail")
    # NCCL_IB_MAX_QPS 128: the most QPs one NCCL connection holds (net_ib.cc, v2.18.3-1)
    qps: Annotated[int, Field(ge=1, le=128, strict=True)] = Field(
        1, description="queue pairs per connection (NCCL_IB_QPS_PER_CONNECTION, 1..128)")
    root: Annotated[int, Field(ge=0, strict=True)] = Field(
        0, description="root rank of broadcast and reduce")
    gpu: Literal["a100", "h100", "h200", "h800", "b200"] | None = Field(
        None, description="the GPU model: NCCL's parameters for it (NVLS on Hopper and "
                          "B200) and, unless fabric.nvlink is set, its NVLink bandwidth "
                          "(default: the jobs' GPU, else the GPU of the fabric's hosts, "
                          "hpnsim.fabrics.hosts: H800 on hpn7 and dcn_plus)")
    per_rail: bool = Field(
        False, description="one collective per rail of the GPUs (same local index on every "
                           "host), all run together (the HPN paper's Multi-AllReduce)")
    together: str = Field(
        "", description="a label: collectives with the same label run in one simulation, "
                        "size by size (they must list the same sizes)")

    @field_validator("op", mode="before")
    @classmethod
    def _op(cls, value: Any) -> str:
        from hpnsim.collectives.ops import normalize_op

        return _as_message(normalize_op, str(value))

    @field_validator("algo", mode="before")
    @classmethod
    def _algo(cls, value: Any) -> str:
        from hpnsim.collectives.ops import normalize_algorithm

        return _as_message(normalize_algorithm, str(value))

    @field_validator("protocol", mode="before")
    @classmethod
    def _protocol(cls, value: Any) -> str:
        from hpnsim.collectives.ops import normalize_protocol

        return _as_message(normalize_protocol, str(value))

    @field_validator("sizes", mode="before")
    @classmethod
    def _sizes(cls, value: Any) -> list[float]:
        return _parse_sizes(value)

    @field_validator("gpus", mode="before")
    @classmethod
    def _gpus(cls, value: Any) -> Any:
        from hpnsim.units import parse_index_ranges

        if value is None:
            return None
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value.strip())          # "16" (the command line's --gpus 16): a count
        if isinstance(value, int) and not isinstance(value, bool):
            if value < 2:
                raise ValueError(f"must be 2 or more (a collective needs two GPUs), "
                                 f"got {value}")
            return value
        if isinstance(value, str) or (isinstance(value, list) and any(
                isinstance(g, str) for g in value)):
            value = _as_message(parse_index_ranges, value)
        if not isinstance(value, list) or any(isinstance(g, bool) or not isinstance(g, int)
                                              for g in value):
            raise ValueError(f"must be a GPU count or a list of GPU indices, got {value!r}")
        if len(value) < 2:
            raise ValueError(f"must list 2 or more GPUs (a collective needs two), got {value}")
        if min(value) < 0:
            raise ValueError(f"GPU indices are 0 or more, got {min(value)}")
        if len(set(value)) != len(value):
            raise ValueError(f"{max(value, key=value.count)} appears twice")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> CollectiveSpec:
        from hpnsim.collectives.ops import check_supported

        if self.algo != "auto":
            try:
                check_supported(self.op, self.algo)
            except InputError as exc:
                raise ValueError(f"algo: {exc.message}") from None
        from hpnsim.workloads.gpus import GPUS

        # nccl-tests' size is a buffer on every GPU: it must fit in the GPU's memory (the
        # collective's GPU, else the largest in the catalog)
        gpu = GPUS[self.gpu] if self.gpu else max(GPUS.values(), key=lambda g: g.memory_bytes)
        if max(self.sizes) > gpu.memory_bytes:
            raise ValueError(f"sizes: {max(self.sizes) / 2**30:,.1f} GiB is more than the "
                             f"{gpu.memory_bytes / 2**30:,.1f} GiB of memory of a GPU "
                             f"({gpu.name}): the buffer sits on every GPU")
        if self.root and self.op not in ("broadcast", "reduce"):
            raise ValueError(f"root: only broadcast and reduce have a root; {self.op} would "
                             f"ignore root {self.root}")
        return self

    def group(self, fabric_gpus: int) -> list[int]:
        """The GPUs of the collective, in rank order, on a fabric of ``fabric_gpus`` GPUs.

        >>> CollectiveSpec(gpus=[8, 0]).group(16), CollectiveSpec().group(4)
        ([8, 0], [0, 1, 2, 3])
        """
        if isinstance(self.gpus, list):
            return list(self.gpus)
        return list(range(fabric_gpus if self.gpus is None else self.gpus))

    def options(self, base):
        """This collective's :class:`~hpnsim.collectives.planning.options.CollectiveOptions`: ``base``
        (the scenario's routing, seed and NCCL parameters, :func:`scenario_options`) with
        its algorithm, protocol, channels, QPs and root.

        >>> from hpnsim.collectives.planning.options import CollectiveOptions
        >>> o = CollectiveSpec(algo="ring").options(CollectiveOptions(seed=2))
        >>> o.algo, o.seed, o.channels
        ('ring', 2, None)
        """
        from dataclasses import replace

        return replace(base, **self.overrides())

    def overrides(self) -> dict:
        """The fields of :class:`~hpnsim.collectives.planning.options.CollectiveOptions` this
        collective sets (its algorithm, protocol, channels, QPs and root); routing, seed and
        NCCL parameters are the scenario's.

        >>> CollectiveSpec(algo="ring", qps=2).overrides()["qps"]
        2
        """
        return {"algo": self.algo, "protocol": self.protocol,
                "channels": self.channels or None, "qps": self.qps, "root": self.root}


def scenario_options(scenario, nccl=None):
    """The :class:`~hpnsim.collectives.planning.options.CollectiveOptions` every collective and job of
    ``scenario`` starts from: its routing, seed and NCCL parameters (``nccl``, as
    :func:`~hpnsim.scenario.prepare.prepare` resolved them; else read from the scenario's
    calibration)."""
    from hpnsim.collectives.planning.options import CollectiveOptions

    return CollectiveOptions(routing=scenario.routing, seed=scenario.seed,
                             routing_options=routing_options(scenario),
                             nccl=scenario.nccl_params() if nccl is None else nccl)


def routing_options(scenario) -> dict | None:
    """The options of :func:`hpnsim.routing.route` a scenario sets: its ``lag`` (None when
    it is the routing's default, ``balanced``)."""
    return None if scenario.lag == "balanced" else {"lag": scenario.lag}


def name_collectives(collectives: list[CollectiveSpec], jobs: list) -> None:
    """Give unnamed collectives ``collective<i>``; refuse a name another collective or a job
    already has (raises ValueError naming ``collectives[i].name``); then check the groups
    run together (:func:`check_together`)."""
    seen = {job.name for job in jobs}
    for i, spec in enumerate(collectives):
        if not spec.name:
            spec.name = f"collective{i}"
        if spec.name in seen:
            raise ValueError(f"collectives[{i}].name: {spec.name!r} is used by another job "
                             f"or collective")
        seen.add(spec.name)
    check_together(collectives)


def check_together(collectives: list[CollectiveSpec]) -> None:
    """Collectives with the same ``together`` label run size by size in one simulation: they
    must list the same sizes and the same ``gpu``, and a per-rail collective (already several collectives run
    together) takes no label. Raises ValueError naming ``collectives[i].<key>``.

    >>> a = CollectiveSpec(together="x", sizes="1M")
    >>> check_together([a, CollectiveSpec(together="x", sizes="2M")])
    Traceback (most recent call last):
    ...
    ValueError: collectives[1].sizes: must be the sizes of collectives[0] (together 'x'), [1048576.0], got [2097152.0]
    """
    first: dict[str, int] = {}
    for i, spec in enumerate(collectives):
        if not spec.together:
            continue
        if spec.per_rail:
            raise ValueError(f"collectives[{i}].together: a per_rail collective already runs "
                             f"its rails together; remove together or per_rail")
        j = first.setdefault(spec.together, i)
        if collectives[j].gpu != spec.gpu:
            raise ValueError(f"collectives[{i}].gpu: must be the gpu of collectives[{j}] "
                             f"(together {spec.together!r}), {collectives[j].gpu}, got "
                             f"{spec.gpu}")
        if collectives[j].sizes != spec.sizes:
            raise ValueError(f"collectives[{i}].sizes: must be the sizes of collectives[{j}] "
                             f"(together {spec.together!r}), {collectives[j].sizes}, got "
                             f"{spec.sizes}")


def larger_fabric_hint(template: str, options: dict, n: int) -> str:
    """``"; for a larger fabric set fabric.pods to P (--pods P)"`` when ``P`` pods of the
    template would hold ``n`` GPUs (and the user did not size it with ``gpus``), else ``""``.

    >>> larger_fabric_hint("hpn7", {}, 20000)
    '; for a larger fabric set fabric.pods to 2 (--pods 2)'
    """
    import math

    from hpnsim.fabrics.registry import planned_gpus, template_parameters

    if n < 2 or "pods" not in template_parameters(template) or "gpus" in options:
        return ""
    keep = {k: v for k, v in options.items() if k not in ("pods", "last_pod_segments")}
    try:
        pods = math.ceil(n / planned_gpus(template, {**keep, "pods": 1}))
        planned_gpus(template, {**keep, "pods": pods})
    except InputError:
        return ""
    if pods <= 1:
        return ""
    return f"; for a larger fabric set fabric.pods to {pods} (--pods {pods})"


def check_collectives(scenario, n_gpus: int, lines: dict | None = None) -> None:
    """Every collective's GPUs exist on a fabric of ``n_gpus`` GPUs (and a broadcast or
    reduce root is one of its ranks). Raises :class:`InputError` named
    ``collectives[i].gpus`` (with the YAML line, given ``lines``).

    >>> from hpnsim.scenario.spec import parse_scenario
    >>> s = parse_scenario({"fabric": {"template": "fat_tree", "k": 4},
    ...                     "collectives": [{"gpus": 64, "sizes": "1M"}]})
    >>> check_collectives(s, 16)
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: collectives[0].gpus: must be 2..16 (a collective needs two GPUs; the fabric has 16), got 64
    """
    lines = lines or {}

    def fail(path, message):
        raise located(InputError(format_path(path), message), lines, path)

    for i, spec in enumerate(scenario.collectives):
        if isinstance(spec.gpus, int) and spec.gpus > n_gpus:
            options = scenario.fabric.options()
            hint = larger_fabric_hint(scenario.fabric.resolved_template, options, spec.gpus)
            fail(("collectives", i, "gpus"), f"must be 2..{n_gpus:,} (a collective needs two "
                                             f"GPUs; the fabric has {n_gpus:,}), got "
                                             f"{spec.gpus}{hint}")
        if spec.gpus is None and n_gpus < 2:
            fail(("collectives", i, "gpus"), f"the fabric has {n_gpus} GPU; a collective "
                                             f"needs two")
        if isinstance(spec.gpus, list) and max(spec.gpus) >= n_gpus:
            fail(("collectives", i, "gpus"), f"GPU {max(spec.gpus)} does not exist (the "
                                             f"fabric has GPUs 0..{n_gpus - 1})")
        size = len(spec.group(n_gpus))
        if spec.root >= size:
            fail(("collectives", i, "root"), f"must be a rank in 0..{size - 1}, got "
                                             f"{spec.root}")
