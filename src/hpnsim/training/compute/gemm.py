"""GEMM time from its shape: a roofline plus the losses of a tiled tensor-core kernel.

``C[M, N] = A[M, K] @ B[K, N]`` on one GPU takes the longer of

- **memory**: the HBM bytes of A, B and C once each, at the achievable HBM bandwidth
  (:data:`~hpnsim.training.compute.memory_ops.HBM_EFFICIENCY` of the datasheet figure);
- **compute**: the kernel cuts C into CTA tiles of ``tm x tn``; each SM computes one tile at a
  time, walking K in blocks of ``kb`` elements (128 bytes of K: 64 for 16-bit, 128 for FP8, 32
  for TF32). A tile costs ``ceil(K / kb) + 1`` block-steps: K rounded up to whole blocks
  (*small-K / K-tail* loss) plus one step in which the first block is loaded before the first
  MMA can issue (the prologue a warp-specialized mainloop cannot hide, amortized only over long
  K). Tiles run in *waves* of ``sm_count`` (*wave quantization*), and ragged edges compute a
  whole tile (*tile quantization*; this is also the *small-M* loss: the smallest Hopper tile
  has 64 rows, the wgmma instruction's M). A block-step runs at the SM's share of the dtype's
  dense peak, times the clock ratio, times an issue efficiency ``eta``.

  The kernel uses the architecture's largest :data:`TILES` whenever their grid fills one wave,
  and otherwise whichever tile is fastest (cuBLAS picks smaller tiles to create parallelism
  for small problems); all tiles share one ``eta``, which is optimistic for the small ones. No
  split-K or stream-K: shapes with few output tiles and long K are slower here than under
  cuBLAS's stream-K kernels.

``eta`` is calibrated, once per GPU and dtype, on a published per-kernel measurement: the
maximum achievable matmul FLOPS (MAMF) of the part, at the shape where it was measured
(:data:`MAMF`): ``eta = MAMF / (peak * f_K * f_edge)`` with ``f_K`` and ``f_edge`` the model's
K-block and tile-edge factors at that shape. ``eta`` carries what the model does not name
(issue stalls, the clock under load, power). Nothing is fitted to end-to-end training
throughput.

Worked example (H100, BF16, 8192^3): 64 x 32 = 2048 tiles of 128x256 are 15.5 waves of 132
SMs, i.e. 16 waves (3% lost); K = 8192 is 128 blocks + 1 prologue step (0.8% lost).

>>> from hpnsim.workloads.gpus import get_gpu
>>> t = gemm_time(8192, 8192, 8192, "bf16", get_gpu("h100"))
>>> t.bound, t.tile, t.waves
('compute', (128, 256), 16)
>>> round(t.achieved_flops / 1e12)
768
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cache, lru_cache

from hpnsim.errors import InputError
from hpnsim.training.compute.memory_ops import HBM_EFFICIENCY
from hpnsim.training.compute.precision import (
    element_bytes,
    positive_int,
    positive_number,
    require_compute_fields,
)
from hpnsim.workloads.gpus import GPUS, GPUSpec

#: CTA tile shapes (rows of C, columns of C) each architecture's GEMM kernels use. Ampere: the
#: cuBLAS tile family of NVIDIA's "Matrix Multiplication Background User's Guide" (DU-09799-001,
#: 2023, section 2.3: 256x128, 128x256, 128x128, then smaller); the 64-row tiles cover small M.
#: Hopper: CUTLASS 3 SM90 warp-specialized kernels (128x128x64 in CUTLASS example 48; cuBLAS's
#: sm90_xmma kernels report tilesize128x256x64 / 256x128x64 for large BF16 GEMMs); 64 rows is
#: the wgmma instruction's M (PTX ISA, wgmma.mma_async m64nNk16). Blackwell: the same per-SM
#: tiles (tcgen05 2-SM tiles of 256 rows are two SMs' 128-row tiles).
TILES: dict[str, tuple[tuple[int, int], ...]] = {
    "ampere": ((256, 128), (128, 256), (128, 128), (64, 128)),
    "hopper": ((128, 256), (256, 128), (128, 128), (64, 256), (64, 128)),
    "blackwell": ((128, 256), (256, 128), (128, 128), (64, 256), (64, 128)),
}
#: bytes of K per mainloop block (128-byte rows: 64 BF16, 128 FP8, 32 TF32 elements; CUTLASS
#: SM80/SM90 default K tiles)
K_BLOCK_BYTES = 128
#: mainloop steps per output tile that no MMA overlaps (the first block's load)
PROLOGUE_STEPS = 1

#: Maximum achievable matmul FLOPS per (GPU, dtype): (measured TFLOP/s, M, N, K of the best
#: shape, torch version). Source: S. Bekman, "Machine Learning Engineering", chapter
#: compute/accelerator, "Maximum Achievable Matmul FLOPS comparison table" (torch.mm, mean of
#: 100 iterations after 50 warm-up, brute-force shape search). H200 BF16: the table's note "H200
#: is the same" as H100. H800: the H100 SXM die, clocks and 700 W limit; H100's figures.
MAMF: dict[tuple[str, str], tuple[float, int, int, int, str]] = {
    ("a100", "bf16"): (271.2, 1024, 10240, 5120, "2.6.0+cu126"),
    ("h100", "bf16"): (794.5, 2048, 2048, 13312, "2.7.0+cu126"),
    ("h200", "bf16"): (794.5, 2048, 2048, 13312, "2.7.0+cu126"),
    ("h800", "bf16"): (794.5, 2048, 2048, 13312, "2.7.0+cu126"),
    ("b200", "bf16"): (1745.0, 1792, 16128, 3072, "2.7.1+cu128"),
    ("h100", "fp8"): (1402.6, 1024, 9216, 14336, "2.7.0+cu126"),
    ("h200", "fp8"): (1453.4, 1280, 4096, 12032, "2.7.1+cu128"),
    ("h800", "fp8"): (1402.6, 1024, 9216, 14336, "2.7.0+cu126"),
    ("b200", "fp8"): (3432.5, 15360, 4096, 3072, "2.7.1+cu128"),
}
#: dtypes without their own MAMF measurement borrow another's issue efficiency: FP16 runs the
#: BF16 tensor rate and kernels; TF32 has no published MAMF, BF16's is assumed.
_MAMF_STAND_IN = {"fp16": "bf16", "tf32": "bf16"}
#: a user GPU borrows the catalog part of its architecture
_ARCH_REFERENCE = {"ampere": "a100", "hopper": "h100", "blackwell": "b200"}


@dataclass(frozen=True)
class GemmTiming:
    """The modelled time of one GEMM (or ``batch`` identical GEMMs in one grouped launch).

    Attributes
    ----------
    m, n, k, batch : int
        Shape: ``batch`` products of ``[m, k] @ [k, n]``.
    dtype : str
        Input dtype (sets the tensor peak and A/B bytes).
    flops, bytes : float
        ``2*m*n*k*batch``; HBM bytes of A, B, C once each.
    tile : tuple of int
        The CTA tile (rows, columns) the kernel uses.
    waves : int
        Waves of tiles over the SMs.
    compute_s, memory_s, seconds : float
        Compute-side and memory-side times; ``seconds`` is the larger (or the kernel-table
        override when one applied).
    bound : str
        ``"compute"``, ``"memory"`` or ``"table"``.
    """

    m: int
    n: int
    k: int
    batch: int
    dtype: str
    flops: float
    bytes: float
    tile: tuple[int, int]
    waves: int
    compute_s: float
    memory_s: float
    seconds: float
    bound: str

    @property
    def achieved_flops(self) -> float:
        """Delivered FLOP/s: ``flops / seconds``."""
        return self.flops / self.seconds


def gemm_time(m: int, n: int, k: int, dtype: str, gpu: GPUSpec, *, batch: int = 1,
              out_dtype: str = "bf16", clock_hz: float | None = None,
              table=None) -> GemmTiming:
    """Time of ``batch`` GEMMs ``[m, k] @ [k, n]`` in ``dtype`` on ``gpu``.

    Parameters
    ----------
    m, n, k : int
        Rows of A and C, columns of B and C, the reduction dimension.
    dtype : str
        ``"bf16"``, ``"fp16"``, ``"fp8"`` or ``"tf32"``; the part must have it.
    gpu : GPUSpec
        A catalog GPU (or a spec with the compute fields).
    batch : int
        Identical GEMMs in one launch (grouped MoE experts): their tiles share the waves.
    out_dtype : str
        dtype of C (FP8 GEMMs write BF16 in Transformer Engine's recipe).
    clock_hz : float, optional
        SM clock under load; defaults to ``gpu.sustained_clock_hz`` (the conditions of the
        calibrating measurement). Compute time scales with its inverse.
    table : KernelTable, optional
        Measured kernels (:mod:`~hpnsim.training.compute.kernel_tables`); where it has GEMM
        rows for this GPU and dtype, their measured/modelled ratio, interpolated in log-shape,
        scales the modelled rate.

    Examples
    --------
    A thin-K GEMM is memory-bound: 4096 x 4096 x 64 moves 34 MB for 2.1 GFLOP.

    >>> from hpnsim.workloads.gpus import get_gpu
    >>> gemm_time(4096, 4096, 64, "bf16", get_gpu("h100")).bound
    'memory'
    >>> gemm_time(4096, 4096, 4096, "fp8", get_gpu("a100"))
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: dtype: a100 has no fp8 tensor cores; choose from tf32, bf16, fp16
    """
    m, n, k = positive_int("m", m), positive_int("n", n), positive_int("k", k)
    batch = positive_int("batch", batch)
    require_compute_fields(gpu)
    gpu.tensor_peak(dtype)
    dtype = str(dtype).strip().lower()
    element_bytes(out_dtype, "out_dtype")
    clock = gpu.sustained_clock_hz if clock_hz is None else positive_number("clock_hz", clock_hz)
    timing = _modelled(m, n, k, batch, dtype, out_dtype, clock, gpu)
    if table is not None:
        ratio = table.gemm_ratio(gpu, dtype, (m, n, k), _model_rate(gpu, dtype))
        if ratio is not None:
            timing = replace(timing, seconds=timing.seconds / ratio, bound="table")
    return timing


@lru_cache(maxsize=1 << 16)
def _modelled(m, n, k, batch, dtype, out_dtype, clock, gpu) -> GemmTiming:
    # validated inputs only; cached because a model has few distinct GEMM shapes per layer
    a_bytes, c_bytes = element_bytes(dtype), element_bytes(out_dtype)
    flops = 2.0 * m * n * k * batch
    traffic = float(batch * ((m * k + k * n) * a_bytes + m * n * c_bytes))
    memory_s = traffic / (gpu.memory_bandwidth * HBM_EFFICIENCY)
    rate_per_sm = (gpu.tensor_peak(dtype) / gpu.sm_count * (clock / gpu.sustained_clock_hz)
                   * issue_efficiency(gpu, dtype))
    tile, waves, work = _best_tile(m, n, k, batch, gpu.architecture, gpu.sm_count, a_bytes)
    compute_s = work / rate_per_sm
    seconds, bound = max((compute_s, "compute"), (memory_s, "memory"))
    return GemmTiming(m, n, k, batch, dtype, flops, traffic, tile, waves, compute_s, memory_s,
                      seconds, bound)


def wave_count(m: int, n: int, tile: tuple[int, int], sm_count: int, batch: int = 1) -> int:
    """Waves of ``tile``-shaped output tiles over ``sm_count`` SMs (one tile per SM at a time).

    >>> wave_count(2048, 2048, (128, 256), 132)   # 16 x 8 = 128 tiles: one wave, 4 SMs idle
    1
    >>> wave_count(2048 + 1, 2048, (128, 256), 132)   # a 17th tile row: 136 tiles, 2 waves
    2
    """
    tiles = batch * math.ceil(m / tile[0]) * math.ceil(n / tile[1])
    return math.ceil(tiles / sm_count)


def _best_tile(m, n, k, batch, architecture, sm_count, a_bytes):
    """(tile, waves, FLOPs-equivalent work per SM) of the tile shape the kernel uses.

    The largest tiles (most operand reuse) are used whenever they fill at least one wave;
    only a grid too small for the SMs falls back to whichever tile is fastest, as cuBLAS's
    heuristics pick smaller tiles to create parallelism for small problems (NVIDIA, Matrix
    Multiplication Background User's Guide, section 2.3). Equal times keep the larger tile.
    """
    if architecture not in TILES:
        raise InputError("gpu", f"no GEMM tiles for architecture {architecture!r}; "
                                f"known: {', '.join(TILES)}")
    k_block = K_BLOCK_BYTES // a_bytes
    steps = math.ceil(k / k_block) + PROLOGUE_STEPS
    tiles = TILES[architecture]
    largest = max(t[0] * t[1] for t in tiles)
    big = [t for t in tiles if t[0] * t[1] == largest]
    fills = any(batch * math.ceil(m / t[0]) * math.ceil(n / t[1]) >= sm_count for t in big)
    best = None
    for tile in (big if fills else tiles):
        waves = wave_count(m, n, tile, sm_count, batch)
        work = waves * 2.0 * tile[0] * tile[1] * k_block * steps
        if best is None or work < best[2]:
            best = (tile, waves, work)
    return best


def issue_efficiency(gpu: GPUSpec, dtype: str) -> float:
    """Fraction of the SM's tensor peak a GEMM mainloop sustains, calibrated on :data:`MAMF`.

    >>> from hpnsim.workloads.gpus import get_gpu
    >>> round(issue_efficiency(get_gpu("h100"), "bf16"), 3)
    0.807
    """
    dtype = str(dtype).strip().lower()
    key = _MAMF_STAND_IN.get(dtype, dtype)
    name = gpu.name if (gpu.name, key) in MAMF else _ARCH_REFERENCE.get(gpu.architecture)
    if (name, key) not in MAMF:
        raise InputError("dtype", f"no GEMM efficiency measurement for {dtype} on "
                                  f"{gpu.architecture or gpu.name}")
    return _calibrated(name, key)


@cache
def _calibrated(name: str, dtype: str) -> float:
    # The best shape of a brute-force search is, by construction, one the measured kernel
    # quantizes well (cuBLAS also has stream-K kernels that remove the wave tail), so only the
    # model's K-block and tile-edge losses at that shape are divided out, not its waves.
    tflops, m, n, k, _ = MAMF[(name, dtype)]
    ref = GPUS[name]
    a_bytes = element_bytes(dtype)
    tile, _, _ = _best_tile(m, n, k, 1, ref.architecture, ref.sm_count, a_bytes)
    k_block = K_BLOCK_BYTES // a_bytes
    k_factor = k / (k_block * (math.ceil(k / k_block) + PROLOGUE_STEPS))
    edge_factor = m * n / (tile[0] * math.ceil(m / tile[0]) * tile[1] * math.ceil(n / tile[1]))
    eta = tflops * 1e12 / ref.tensor_peak(dtype) / (k_factor * edge_factor)
    if not 0 < eta <= 1:
        raise AssertionError(f"MAMF calibration of {name} {dtype} gave eta={eta}")
    return eta


def _model_rate(gpu: GPUSpec, dtype: str):
    def rate(shape: tuple[int, ...]) -> float:
        m, n, k = shape
        return gemm_time(m, n, k, dtype, gpu).achieved_flops
    return rate
