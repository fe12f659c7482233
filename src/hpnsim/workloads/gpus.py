"""GPU catalog: the figures an iteration simulation needs from an accelerator.

Peak figures are NVIDIA's published *dense* (no structured sparsity) BF16 tensor-core
rates for the SXM parts; memory bandwidth is the HBM figure. ``mfu`` is a constant
fraction of peak for every kernel: hpnsim's compute model before the per-operation one. An
iteration no longer uses it (the per-operation model times every kernel from its shape),
except for a user :class:`GPUSpec` without the compute-model fields, or when a job asks for
the constant model explicitly (``compute_efficiency``, which replaces it). The catalog values,
kept for those cases, came from end-to-end runs (which is why they were replaced):

- A100: Megatron-LM reports 52% of peak for GPT-3 175B on 3072 A100s (Narayanan et al.,
  SC'21); 0.50.
- H100/H800: Llama 3 (Dubey et al., 2024) reports 38–43% BF16 MFU end to end on 16K
  H100s; 0.45.
- B200: early published large-scale runs sit well below Hopper's fraction of peak; 0.40.

The per-operation compute model (:mod:`hpnsim.training.compute`) needs the fields added for
it, each with its source in :data:`GPU_SOURCES`: the SM count, the boost and sustained SM
clocks, the dense tensor-core peak per dtype
(:meth:`GPUSpec.tensor_peak`), the L2 size and the architecture.
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
    architecture : str
        ``"ampere"``, ``"hopper"`` or ``"blackwell"``: picks the GEMM tile shapes and the
        attention kernel the compute model assumes ("" for a user part without the fields).
    sm_count : int
        Streaming multiprocessors enabled on the part (the unit of wave quantization).
    boost_clock_hz : float
        SM clock at which NVIDIA's tensor peaks are quoted, Hz.
    sustained_clock_hz : float
        SM clock under sustained dense tensor load at the default power limit, Hz. NVIDIA
        publishes no such figure; the catalog sets it to ``boost_clock_hz`` and the measured
        GEMM ceilings the compute model uses already contain whatever throttling the
        measurement saw. Set it from ``nvidia-smi`` during a run, or lower it to model a
        power cap: compute-bound kernels scale with it.
    tensor_peaks : tuple of (str, float)
        Dense (no 2:4 sparsity) tensor-core peak per dtype, FLOP/s; see :meth:`tensor_peak`.
    l2_bytes : float
        L2 cache size, bytes.

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
    architecture: str = ""
    sm_count: int = 0
    boost_clock_hz: float = 0.0
    sustained_clock_hz: float = 0.0
    tensor_peaks: tuple[tuple[str, float], ...] = ()
    l2_bytes: float = 0.0

    @property
    def achieved_flops(self) -> float:
        """FLOP/s actually delivered while computing: ``peak_flops * mfu``."""
        return self.peak_flops * self.mfu

    def to_dict(self) -> dict:
        """Plain dict of the fields."""
        return asdict(self)

    @property
    def dtypes(self) -> tuple[str, ...]:
        """Dtypes the tensor cores run, in catalog order.

        >>> get_gpu("a100").dtypes
        ('tf32', 'bf16', 'fp16')
        """
        return tuple(name for name, _ in self.tensor_peaks)

    def tensor_peak(self, dtype: str) -> float:
        """Dense tensor-core peak for ``dtype``, FLOP/s.

        Raises :class:`~hpnsim.errors.InputError` naming the dtype when the part lacks it
        (FP8 before Hopper) or when the spec has no per-dtype peaks.

        Examples
        --------
        >>> get_gpu("h100").tensor_peak("fp8") / 1e12
        1978.9
        >>> get_gpu("a100").tensor_peak("fp8")
        Traceback (most recent call last):
        ...
        hpnsim.errors.InputError: dtype: a100 has no fp8 tensor cores; choose from tf32, bf16, fp16
        """
        key = str(dtype).strip().lower()
        peaks = dict(self.tensor_peaks)
        if not peaks:
            raise InputError("dtype", f"{self.name} has no per-dtype tensor peaks in its spec")
        if key not in peaks:
            raise InputError("dtype", f"{self.name} has no {key} tensor cores; "
                                      f"choose from {', '.join(self.dtypes)}")
        return peaks[key]


_MIB = 2.0**20
# Dense tensor peaks, FLOP/s. A100: NVIDIA A100 datasheet (SXM4 80GB). Hopper: NVIDIA H100
# datasheet (SXM5; the sparse figures halved); H800 and H200 have the H100 SXM die and its
# peaks (NVIDIA H800 and H200 datasheets). B200: NVIDIA HGX B200 datasheet (8-GPU sparse
# figures divided by 16).
_AMPERE_PEAKS = (("tf32", 156e12), ("bf16", 312e12), ("fp16", 312e12))
_HOPPER_PEAKS = (("tf32", 494.7e12), ("bf16", 989.4e12), ("fp16", 989.4e12),
                 ("fp8", 1978.9e12))
_B200_PEAKS = (("tf32", 1125e12), ("bf16", 2250e12), ("fp16", 2250e12), ("fp8", 4500e12))
_HOPPER = dict(architecture="hopper", sm_count=132, boost_clock_hz=1830e6,
               sustained_clock_hz=1830e6, tensor_peaks=_HOPPER_PEAKS, l2_bytes=50 * _MIB)

GPUS: dict[str, GPUSpec] = {
    "a100": GPUSpec("a100", 312e12, 80e9, 2.039e12, 600e9, 0.50, architecture="ampere",
                    sm_count=108, boost_clock_hz=1410e6, sustained_clock_hz=1410e6,
                    tensor_peaks=_AMPERE_PEAKS, l2_bytes=40 * _MIB),
    "h100": GPUSpec("h100", 989.4e12, 80e9, 3.35e12, 900e9, 0.45, nvls=True, **_HOPPER),
    # H200: the H100 die with 141 GB of HBM3e at 4.8 TB/s (NVIDIA H200 datasheet).
    "h200": GPUSpec("h200", 989.4e12, 141e9, 4.8e12, 900e9, 0.45, nvls=True, **_HOPPER),
    # H800: the H100 compute die with NVLink cut to 400 GB/s (the HPN 7.0 host).
    "h800": GPUSpec("h800", 989.4e12, 80e9, 3.35e12, 400e9, 0.45, nvls=True, **_HOPPER),
    "b200": GPUSpec("b200", 2250e12, 180e9, 8.0e12, 1800e9, 0.40, nvls=True,
                    architecture="blackwell", sm_count=148, boost_clock_hz=1965e6,
                    sustained_clock_hz=1965e6, tensor_peaks=_B200_PEAKS,
                    l2_bytes=126 * _MIB),
}

#: Where each compute-model field of the catalog comes from, per GPU and field.
GPU_SOURCES: dict[str, dict[str, str]] = {
    "a100": {
        "sm_count": "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020): 108 SMs",
        "boost_clock_hz": "NVIDIA A100 whitepaper: GPU Boost Clock 1410 MHz",
        "sustained_clock_hz": "not published by NVIDIA; set to the boost clock (see GPUSpec)",
        "tensor_peaks": "NVIDIA A100 datasheet (SXM4 80GB): TF32 156, BF16/FP16 312 TFLOPS "
                        "dense; no FP8 (Ampere)",
        "memory_bandwidth": "NVIDIA A100 datasheet: 2039 GB/s HBM2e (80GB SXM4)",
        "l2_bytes": "NVIDIA Ampere tuning guide / A100 whitepaper: 40 MB L2",
    },
    "h100": {
        "sm_count": "NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022): 132 SMs "
                    "on H100 SXM5",
        "boost_clock_hz": "1830 MHz: the clock NVIDIA's dense peaks are quoted at "
                          "(132 SMs x 4096 BF16 FLOP/clk x 1.83 GHz = 989.4 TFLOPS)",
        "sustained_clock_hz": "not published by NVIDIA; set to the boost clock (see GPUSpec)",
        "tensor_peaks": "NVIDIA H100 datasheet (SXM5): TF32 494.7, BF16/FP16 989.4, "
                        "FP8 1978.9 TFLOPS dense",
        "memory_bandwidth": "NVIDIA H100 datasheet: 3.35 TB/s HBM3",
        "l2_bytes": "NVIDIA Hopper tuning guide: 50 MB L2 on H100 SXM5",
    },
    "b200": {
        "sm_count": "148 SMs as the part reports them (CUDA multiProcessorCount); Austin "
                    "et al., How to Scale Your Model (2025), GPU chapter",
        "boost_clock_hz": "1965 MHz, the device-reported maximum SM clock (nvidia-smi), as "
                          "tabulated in Bekman, Machine Learning Engineering, accelerators",
        "sustained_clock_hz": "not published by NVIDIA; set to the boost clock (see GPUSpec)",
        "tensor_peaks": "NVIDIA HGX B200 datasheet: 18/36/72 PFLOPS TF32/BF16/FP8 sparse "
                        "for 8 GPUs, i.e. 1.125/2.25/4.5 PFLOPS dense per GPU",
        "memory_bandwidth": "NVIDIA HGX B200 datasheet: 8 TB/s HBM3e per GPU",
        "l2_bytes": "NVIDIA Blackwell tuning guide: 126 MB L2",
    },
}
GPU_SOURCES["h200"] = {**GPU_SOURCES["h100"],
                       "memory_bandwidth": "NVIDIA H200 datasheet: 4.8 TB/s HBM3e",
                       "tensor_peaks": "NVIDIA H200 datasheet: the H100 SXM peaks"}
GPU_SOURCES["h800"] = {**GPU_SOURCES["h100"],
                       "tensor_peaks": "NVIDIA H800 datasheet: the H100 SXM peaks"}


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
