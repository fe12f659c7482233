"""GPU catalog: the figures an iteration simulation needs from an accelerator.

Peak figures are NVIDIA's published *dense* (no structured sparsity) BF16 tensor-core
rates for the SXM parts; memory bandwidth is the HBM figure. ``mfu`` is the fraction of
peak that the compute kernels of a large transformer typically reach *while computing*
(the simulated iteration's overall MFU is lower: communication and pipeline bubbles
come on top). Sources for the defaults:

- A100: Megatron-LM reports 52% of peak for GPT-3 175B on 3072 A100s (Narayanan et al.,
  SC'21); we take 0.50.
- H100/H800: Llama 3 (Dubey et al., 2024) reports 38–43% BF16 MFU end to end on 16K
  H100s; the kernels alone reach more, we take 0.45.
- B200: early published large-scale runs sit well below Hopper's fraction of peak; we
  take 0.40 and recommend overriding it with a measured figure.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from hpnsim.errors import InputError


@dataclass(frozen=True)
class GPUSpec:
    """One accelerator model.

    Attributes
    ----------
    name : str
        Catalog key (lower case).
    peak_flops : float
        Dense BF16 tensor-core peak, FLOP/s.
    memory_bytes : float
        HBM capacity, bytes.
    memory_bandwidth : float
        HBM bandwidth, bytes/s (the optimizer step is memory-bound).
    nvlink_bandwidth : float
        NVLink bandwidth per GPU, bidirectional, bytes/s (informative; the fabric's
        NVLink links decide the simulated TP time).
    mfu : float
        Achievable fraction of ``peak_flops`` during compute kernels, in (0, 1].
    nvls : bool
        NVLink SHARP (NVSwitch multicast and in-switch reduction) available to NCCL's NVLS
        algorithms: every Hopper part (H100, H800, H200) and Blackwell B200 on NVSwitch
        (third-generation NVSwitch or later) systems, NCCL 2.17+; not A100 (NVSwitch 2 has no
        SHARP). The H800 keeps the NVSwitch and its SHARP engines (its NVLink is cut to 8
        links, 400 GB/s); the HPN paper ran NCCL 2.18.3 with NVLS all-reduce on H800 hosts.

    Examples
    --------
    >>> h800 = get_gpu("h800")
    >>> h800.peak_flops / 1e12, h800.mfu
    (989.4, 0.45)
    >>> round(h800.achieved_flops / 1e12, 1)
    445.2
    """

    name: str
    peak_flops: float
    memory_bytes: float
    memory_bandwidth: float
    nvlink_bandwidth: float
    mfu: float
    nvls: bool = False

    @property
    def achieved_flops(self) -> float:
        """FLOP/s actually delivered while computing: ``peak_flops * mfu``."""
        return self.peak_flops * self.mfu

    def to_dict(self) -> dict:
        """Plain dict of the fields."""
        return asdict(self)


GPUS: dict[str, GPUSpec] = {
    "a100": GPUSpec("a100", 312e12, 80e9, 2.039e12, 600e9, 0.50),
    "h100": GPUSpec("h100", 989.4e12, 80e9, 3.35e12, 900e9, 0.45, nvls=True),
    # H200: the H100 die with 141 GB of HBM3e at 4.8 TB/s (NVIDIA H200 datasheet).
    "h200": GPUSpec("h200", 989.4e12, 141e9, 4.8e12, 900e9, 0.45, nvls=True),
    # H800: the H100 compute die with NVLink cut to 400 GB/s (the HPN 7.0 host).
    "h800": GPUSpec("h800", 989.4e12, 80e9, 3.35e12, 400e9, 0.45, nvls=True),
    "b200": GPUSpec("b200", 2250e12, 180e9, 8.0e12, 1800e9, 0.40, nvls=True),
}


def get_gpu(name: str | GPUSpec, *, mfu: float | None = None) -> GPUSpec:
    """Look up a GPU by name (case-insensitive), optionally overriding its MFU.

    Parameters
    ----------
    name : str or GPUSpec
        ``"a100"``, ``"h100"``, ``"h200"``, ``"h800"`` or ``"b200"``; a ``GPUSpec`` passes through.
    mfu : float, optional
        Achievable fraction of peak during compute, in (0, 1].

    Examples
    --------
    >>> get_gpu("A100", mfu=0.4).achieved_flops / 1e12
    124.8
    >>> get_gpu("v100")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: gpu: unknown GPU 'v100'; choose from a100, b200, h100, h200, h800
    """
    if isinstance(name, GPUSpec):
        spec = name
    else:
        key = str(name).strip().lower()
        if key not in GPUS:
            raise InputError("gpu", f"unknown GPU {name!r}; choose from {', '.join(sorted(GPUS))}")
        spec = GPUS[key]
    if mfu is not None:
        if not (0 < float(mfu) <= 1):
            raise InputError("mfu", f"must be in (0, 1], got {mfu!r}")
        spec = replace(spec, mfu=float(mfu))
    return spec
