"""GEMM time from its shape: a roofline plus the losses of a tiled tensor-core kernel.

``C[M, N] = A[M, K] @ B[K, N]`` on one GPU takes the longer of

- **memory**: the HBM bytes of A, B and C once each, at the GEMM's fitted streaming
  efficiency of the datasheet bandwidth plus a floor (elsewhere
  :data:`~hpnsim.training.compute.memory_ops.HBM_EFFICIENCY`, no floor);
- **compute**: the kernel cuts C into CTA tiles of ``tm x tn``; each SM computes one tile at a
  time, walking K in blocks of ``kb`` elements (128 bytes of K: 64 for 16-bit, 128 for FP8, 32
  for TF32). A tile costs ``ceil(K / kb) + 1`` block-steps: K rounded up to whole blocks
  (*small-K / K-tail* loss) plus one step in which the first block is loaded before the first
  MMA can issue (the prologue a warp-specialized mainloop cannot hide, amortized only over long
  K). Tiles run in *waves* of ``sm_count`` (*wave quantization*), and ragged edges compute a
  whole tile (*tile quantization*; this is also the *small-M* loss: the smallest Hopper tile
  has 64 rows, the wgmma instruction's M). A block-step runs at the SM's share of the dtype's
  dense peak, times the clock ratio, times an issue efficiency ``eta``.

  The kernel is whichever of the architecture's :data:`TILES` pads least, and below one wave
  of the largest tiles also whichever split-K (:func:`kernel_plan`); all tiles of a shape
  class share one ``eta``, which is optimistic for the small ones. No stream-K: shapes whose
  last wave is ragged are slower here than under cuBLAS's stream-K kernels.

``eta`` is **fitted to measured kernels** where the part was measured (A100 and H100 16-bit
GEMMs from microsoft/vidur's per-operation profiles; Hopper FP8 per library
(:mod:`~hpnsim.training.compute.gemm_library`): cuBLASLt from public ``torch._scaled_mm``
timings, the default, or DeepGEMM from alibaba/InferSim's table; H800 and H200 share H100's
compute): one ``eta`` per :class:`ShapeClass` (a grid under
one wave, with smaller tiles and split-K; one to four waves; more), with a shortest kernel
``floor_s`` added to the compute side and a fitted streaming efficiency on the memory side
(:mod:`~hpnsim.training.compute.calibration`; fit and held-out errors in docs/compute.md). The
maximum achievable matmul FLOPS (:data:`MAMF`) of the part is a bound only: no GEMM runs faster.
Parts without measurements (B200, TF32) keep the MAMF calibration: ``eta = MAMF / (peak * f_K *
f_edge)`` at the shape where MAMF was measured. Nothing is fitted to end-to-end training
throughput.

Worked example (H100, BF16, 8192^3): 64 x 32 = 2048 tiles of 128x256 are 15.5 waves of 132
SMs, i.e. 16 waves (3% lost, the many-waves class); 64x128 tiles pad less (8192 tiles, 62.06
waves -> 63 of a quarter of the work: 15.75); K = 8192 is 128 blocks + 1 prologue step.

>>> from hpnsim.workloads.gpus import get_gpu
>>> t = gemm_time(8192, 8192, 8192, "bf16", get_gpu("h100"))
>>> t.bound, t.tile, t.waves, t.shape_class.value
('compute', (64, 128), 63, 'many_waves')
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cache, lru_cache

from hpnsim.errors import InputError
from hpnsim.training.compute.calibration import (
    FEW_WAVES_MAX,
    GemmCalibration,
    ShapeClass,
    gemm_calibration,
)
from hpnsim.training.compute.gemm_library import GemmLibrary, gemm_library
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
#: fewest K blocks a split-K slice keeps (a model choice: shorter slices would spend more on
#: the prologue and the partial-sum reduction than they gain)
MIN_SPLIT_BLOCKS = 4

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
#: dtype -> the calibration's dtype class (FP16 and BF16 run the same tensor rate and kernels;
#: FP8 classes are per library, :func:`dtype_class`)
_DTYPE_CLASS = {"bf16": "16bit", "fp16": "16bit", "fp8": "fp8"}
#: (catalog part, dtype class) -> the measured part whose fitted calibration it uses. H800 and
#: H200 are the H100 die and clocks (their memory side keeps their own bandwidth); cuBLASLt FP8
#: was measured on H100s (``torch._scaled_mm``), DeepGEMM on an H800 (InferSim).
_FITTED_PART = {
    ("a100", "16bit"): ("a100", "16bit"),
    **{(p, "16bit"): ("h100", "16bit") for p in ("h100", "h800", "h200")},
    **{(p, "fp8-cublas"): ("h100", "fp8-cublas") for p in ("h100", "h800", "h200")},
    **{(p, "fp8-deepgemm"): ("h800", "fp8-deepgemm") for p in ("h100", "h800", "h200")},
}


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
        ``"compute"``, ``"memory"``, ``"ceiling"`` (the MAMF bound) or ``"table"``.
    split : int
        Split-K slices (1: none).
    shape_class : ShapeClass
        The shape class whose fitted efficiency applied.
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
    split: int = 1
    shape_class: ShapeClass = ShapeClass.MANY_WAVES

    @property
    def achieved_flops(self) -> float:
        """Delivered FLOP/s: ``flops / seconds``."""
        return self.flops / self.seconds


def gemm_time(m: int, n: int, k: int, dtype: str, gpu: GPUSpec, *, batch: int = 1,
              out_dtype: str = "bf16", clock_hz: float | None = None,
              table=None, library: GemmLibrary | str | None = None) -> GemmTiming:
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
    library : GemmLibrary or str, optional
        The FP8 GEMM library whose measured kernels calibrate an FP8 GEMM
        (:mod:`~hpnsim.training.compute.gemm_library`; default cuBLASLt, as TransformerEngine
        runs it); 16-bit GEMMs are cuBLAS's whatever it says.

    Examples
    --------
    A thin-K GEMM is memory-bound: 4096 x 4096 x 64 moves 34 MB for 2.1 GFLOP.

    >>> from hpnsim.workloads.gpus import get_gpu
    >>> gemm_time(4096, 4096, 64, "bf16", get_gpu("h100")).bound
    'memory'
    >>> h100 = get_gpu("h100")   # DeepGEMM's kernels are faster than cuBLASLt's at this shape
    >>> (gemm_time(4096, 4096, 4096, "fp8", h100, library="deepgemm").seconds
    ...  < gemm_time(4096, 4096, 4096, "fp8", h100).seconds)
    True
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
    library = gemm_library(library)
    timing = _modelled(m, n, k, batch, dtype, out_dtype, clock, gpu, library)
    if table is not None:
        ratio = table.gemm_ratio(gpu, dtype, (m, n, k), _model_rate(gpu, dtype, library))
        if ratio is not None:
            timing = replace(timing, seconds=timing.seconds / ratio, bound="table")
    return timing


@dataclass(frozen=True)
class KernelPlan:
    """The kernel the model runs for one GEMM shape: its tiles, split, waves and work.

    Attributes
    ----------
    tile : tuple of int
        CTA tile (rows, columns).
    split : int
        K split into ``split`` slices run by separate CTAs (split-K; 1 = none).
    waves : int
        Waves of ``tiles x split`` CTAs over the SMs.
    block_steps : int
        Mainloop steps each CTA runs: its K blocks plus the prologue.
    shape_class : ShapeClass
        The class whose fitted efficiency applies.
    work : float
        FLOP-equivalent work per SM: ``waves x block_steps x 2 tm tn kb``.
    """

    tile: tuple[int, int]
    split: int
    waves: int
    block_steps: int
    shape_class: ShapeClass
    work: float


@lru_cache(maxsize=1 << 16)
def kernel_plan(m: int, n: int, k: int, batch: int, architecture: str, sm_count: int,
                a_bytes: int) -> KernelPlan:
    """The tile, split and waves the model runs ``batch`` GEMMs ``[m,k] @ [k,n]`` with.

    The kernel is whichever of the architecture's tiles, and for a grid under one wave whichever
    split of K into slices of at least :data:`MIN_SPLIT_BLOCKS` blocks that keeps the CTAs in one
    wave, does the least padded work: cuBLAS's heuristics choose among tile shapes and split-K
    kernels per shape (NVIDIA, Matrix Multiplication Background User's Guide, section 2.3), and
    on the measured kernels this choice fits better than keeping the largest tile whenever it
    fills a wave (docs/compute.md). Equal work keeps the larger tile. The shape class is set by
    the grid of the largest tiles, so the plan does not depend on the fitted efficiencies.

    >>> kernel_plan(8192, 8192, 8192, 1, "hopper", 132, 2).waves   # 64x128 tiles
    63
    >>> p = kernel_plan(64, 4096, 8192, 1, "hopper", 132, 2)   # 32 tiles: K split 4 ways
    >>> p.tile, p.split, p.shape_class.value
    ((64, 128), 4, 'sub_wave')
    """
    if architecture not in TILES:
        raise InputError("gpu", f"no GEMM tiles for architecture {architecture!r}; "
                                f"known: {', '.join(TILES)}")
    k_block = K_BLOCK_BYTES // a_bytes
    blocks = math.ceil(k / k_block)
    tiles = TILES[architecture]
    largest = max(t[0] * t[1] for t in tiles)
    big = [t for t in tiles if t[0] * t[1] == largest]
    fills = any(batch * math.ceil(m / t[0]) * math.ceil(n / t[1]) >= sm_count for t in big)
    best = None
    for tile in tiles:
        grid = batch * math.ceil(m / tile[0]) * math.ceil(n / tile[1])
        splits = [1] if grid >= sm_count else [s for s in range(1, sm_count // grid + 1)
                                               if s == 1 or blocks // s >= MIN_SPLIT_BLOCKS]
        for split in splits:
            waves = math.ceil(grid * split / sm_count)
            steps = math.ceil(blocks / split) + PROLOGUE_STEPS
            work = waves * 2.0 * tile[0] * tile[1] * k_block * steps
            if best is None or work < best[-1]:
                best = (tile, split, waves, steps, work)
    tile, split, waves, steps, work = best
    big_waves = min(wave_count(m, n, t, sm_count, batch) for t in big)
    if not fills:
        shape_class = ShapeClass.SUB_WAVE
    elif big_waves <= FEW_WAVES_MAX:
        shape_class = ShapeClass.FEW_WAVES
    else:
        shape_class = ShapeClass.MANY_WAVES
    return KernelPlan(tile, split, waves, steps, shape_class, work)


@lru_cache(maxsize=1 << 16)
def _modelled(m, n, k, batch, dtype, out_dtype, clock, gpu, library) -> GemmTiming:
    # validated inputs only; cached because a model has few distinct GEMM shapes per layer
    a_bytes, c_bytes = element_bytes(dtype), element_bytes(out_dtype)
    cal = calibration(gpu, dtype, library)
    flops = 2.0 * m * n * k * batch
    traffic = float(batch * ((m * k + k * n) * a_bytes + m * n * c_bytes))
    memory_s = traffic / (gpu.memory_bandwidth * cal.memory_efficiency) + cal.memory_floor_s
    plan = kernel_plan(m, n, k, batch, gpu.architecture, gpu.sm_count, a_bytes)
    clock_ratio = clock / gpu.sustained_clock_hz
    rate_per_sm = (gpu.tensor_peak(dtype) / gpu.sm_count * clock_ratio
                   * cal.eta[plan.shape_class])
    compute_s = plan.work / rate_per_sm + cal.floor_s
    ceiling = mamf_ceiling(gpu, dtype)
    ceiling_s = flops / (ceiling * clock_ratio) if ceiling else 0.0
    seconds, bound = max((compute_s, "compute"), (memory_s, "memory"), (ceiling_s, "ceiling"))
    return GemmTiming(m, n, k, batch, dtype, flops, traffic, plan.tile, plan.waves, compute_s,
                      memory_s, seconds, bound, plan.split, plan.shape_class)


def wave_count(m: int, n: int, tile: tuple[int, int], sm_count: int, batch: int = 1) -> int:
    """Waves of ``tile``-shaped output tiles over ``sm_count`` SMs (one tile per SM at a time).

    >>> wave_count(2048, 2048, (128, 256), 132)   # 16 x 8 = 128 tiles: one wave, 4 SMs idle
    1
    >>> wave_count(2048 + 1, 2048, (128, 256), 132)   # a 17th tile row: 136 tiles, 2 waves
    2
    """
    tiles = batch * math.ceil(m / tile[0]) * math.ceil(n / tile[1])
    return math.ceil(tiles / sm_count)


def _dtype_key(dtype: str) -> str:
    return _MAMF_STAND_IN.get(dtype, dtype)


def _reference(gpu: GPUSpec) -> str | None:
    return gpu.name if gpu.name in GPUS else _ARCH_REFERENCE.get(gpu.architecture)


def mamf_ceiling(gpu: GPUSpec, dtype: str) -> float | None:
    """The part's maximum achievable matmul FLOP/s (:data:`MAMF`), a bound on every GEMM, or
    None where none was published.

    >>> from hpnsim.workloads.gpus import get_gpu
    >>> mamf_ceiling(get_gpu("h800"), "bf16") / 1e12
    794.5
    """
    key = (_reference(gpu), _dtype_key(str(dtype).strip().lower()))
    return MAMF[key][0] * 1e12 if key in MAMF else None


def dtype_class(dtype: str, library: GemmLibrary | str | None = None) -> str | None:
    """The calibration class of a GEMM in ``dtype`` run by ``library``: ``"16bit"`` (BF16 and
    FP16, cuBLAS), ``"fp8-cublas"``, ``"fp8-deepgemm"``; None for a dtype never measured.

    >>> dtype_class("bf16", "deepgemm"), dtype_class("fp8"), dtype_class("tf32")
    ('16bit', 'fp8-cublas', None)
    """
    key = _DTYPE_CLASS.get(str(dtype).strip().lower())
    return f"{key}-{gemm_library(library).value}" if key == "fp8" else key


def calibration(gpu: GPUSpec, dtype: str,
                library: GemmLibrary | str | None = None) -> GemmCalibration:
    """The GEMM calibration of ``gpu``, ``dtype`` and FP8 ``library``: fitted to measured
    kernels where the part (or the part it shares its compute with) was measured, else the
    MAMF-ceiling one.

    >>> from hpnsim.workloads.gpus import get_gpu
    >>> calibration(get_gpu("h800"), "bf16") == calibration(get_gpu("h100"), "fp16")
    True
    >>> calibration(get_gpu("b200"), "bf16").fitted_on   # no measurement: MAMF ceiling
    ()
    >>> calibration(get_gpu("h100"), "fp8", "deepgemm").fitted_on[0]
    'n=128,k=65536'
    """
    dtype = str(dtype).strip().lower()
    reference = _reference(gpu)
    fitted = _FITTED_PART.get((reference, dtype_class(dtype, library)))
    if fitted is not None:
        return gemm_calibration(*fitted)
    eta = _mamf_eta(gpu, dtype)
    return GemmCalibration({c: eta for c in ShapeClass}, 0.0, HBM_EFFICIENCY, 0.0)


def issue_efficiency(gpu: GPUSpec, dtype: str,
                     shape_class: ShapeClass = ShapeClass.MANY_WAVES) -> float:
    """Fraction of the SM's tensor peak a GEMM mainloop of ``shape_class`` sustains.

    >>> from hpnsim.workloads.gpus import get_gpu
    >>> round(issue_efficiency(get_gpu("b200"), "bf16"), 3)   # MAMF-calibrated
    0.792
    """
    return calibration(gpu, dtype).eta[shape_class]


def _mamf_eta(gpu: GPUSpec, dtype: str) -> float:
    key = _dtype_key(dtype)
    name = _reference(gpu)
    if (name, key) not in MAMF:
        raise InputError("dtype", f"no GEMM efficiency measurement for {dtype} on "
                                  f"{gpu.architecture or gpu.name}")
    return _mamf_calibrated(name, key)


@cache
def _mamf_calibrated(name: str, dtype: str) -> float:
    # The best shape of a brute-force search is, by construction, one the measured kernel
    # quantizes well (cuBLAS also has stream-K kernels that remove the wave tail), so only the
    # model's K-block and tile-edge losses at that shape are divided out, not its waves.
    tflops, m, n, k, _ = MAMF[(name, dtype)]
    ref = GPUS[name]
    a_bytes = element_bytes(dtype)
    tile = kernel_plan(m, n, k, 1, ref.architecture, ref.sm_count, a_bytes).tile
    k_block = K_BLOCK_BYTES // a_bytes
    k_factor = k / (k_block * (math.ceil(k / k_block) + PROLOGUE_STEPS))
    edge_factor = m * n / (tile[0] * math.ceil(m / tile[0]) * tile[1] * math.ceil(n / tile[1]))
    eta = tflops * 1e12 / ref.tensor_peak(dtype) / (k_factor * edge_factor)
    if not 0 < eta <= 1:
        raise AssertionError(f"MAMF calibration of {name} {dtype} gave eta={eta}")
    return eta


def _model_rate(gpu: GPUSpec, dtype: str, library: GemmLibrary):
    def rate(shape: tuple[int, ...]) -> float:
        m, n, k = shape
        return gemm_time(m, n, k, dtype, gpu, library=library).achieved_flops
    return rate
