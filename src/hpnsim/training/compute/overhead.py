"""The time between kernels: the GPU's dispatch gap, and a host that issues kernels too slowly.

A stream of kernels is not back to back. Measured on a public PyTorch profiler trace of a
training step (deepseek-ai/profile-data, ``train.json``, commit 4496024, MIT licence: one
H800 of a 64-GPU DeepSeek-V3 run, EP64 TP1, 4k sequence, two DualPipe chunks of four MoE
layers; 907 kernels on the compute stream 7 of rank 0), with the host 15.8 ms ahead of the GPU
(median of kernel start minus its ``cudaLaunchKernel``):

- the gap from one kernel's end to the next one's start on the stream: 2.06 µs on average
  over the 882 gaps under 10 µs (median 2 µs, 95th percentile 4 µs; the trace's clock ticks
  in µs); the 24 longer ones (19 µs to 1.8 ms) are waits for all-to-all events, not dispatch
  (:data:`KERNEL_GAP_S`);
- the host's time per kernel: consecutive ``cudaLaunchKernel`` calls of the launching threads
  are 28.5 µs apart (median over 551 launches of the main thread; 29.0 µs over 372 of the
  autograd thread): the Python, autograd and dispatcher work of one eager op
  (:data:`HOST_PER_KERNEL_S`);
- a kernel launched on an idle GPU starts 5 µs after its launch call (the smallest lead in the
  trace; :data:`LAUNCH_LATENCY_S`).

A pass of ``n`` kernels of ``t`` seconds in all therefore takes ``max(t + n g, n h)``: the
dispatch gaps, or, when its kernels are shorter than the host's time per kernel, the host's
pace (the launch queue drains and the GPU waits for the CPU). The time beyond ``t`` is the
pass's ``gaps``, an op of its own kind (:func:`gaps_op`). Each modelled op is one kernel (the
real framework launches a few more: casts, copies, bias kernels it does not fuse).

>>> op = gaps_op(10, 1e-3, "forward")           # ten kernels of 100 µs: dispatch gaps
>>> op.kind, round(op.seconds * 1e6, 1)
('gaps', 20.6)
>>> round(gaps_op(10, 1e-4, "forward").seconds * 1e6, 1)   # 10 µs kernels: the host's pace
185.0
"""

from __future__ import annotations

from hpnsim.errors import InputError
from hpnsim.training.compute.ops import Op

#: Mean gap between consecutive kernels on a busy stream (module docstring).
KERNEL_GAP_S = 2.06e-6
#: Host time per kernel of an eager PyTorch training step (module docstring).
HOST_PER_KERNEL_S = 28.5e-6
#: Launch-to-start latency of a kernel on an idle GPU (module docstring).
LAUNCH_LATENCY_S = 5e-6


def pass_gaps(kernels: int, kernel_seconds: float, *, after_sync: bool = False) -> float:
    """Seconds a pass of ``kernels`` kernels (``kernel_seconds`` of them in all) spends
    between them; ``after_sync``: the host has just waited for the GPU (an ``.item()``), so
    the first kernel also waits for its launch.

    >>> pass_gaps(0, 0.0), round(pass_gaps(1, 1.0, after_sync=True) * 1e6, 2)
    (0.0, 7.06)
    """
    if isinstance(kernels, bool) or not isinstance(kernels, int) or kernels < 0:
        raise InputError("kernels", f"must be a non-negative integer, got {kernels!r}")
    if kernels == 0:
        return 0.0
    latency = LAUNCH_LATENCY_S if after_sync else 0.0
    gpu = kernel_seconds + kernels * KERNEL_GAP_S + latency
    host = kernels * HOST_PER_KERNEL_S + latency
    return max(gpu, host) - kernel_seconds


def gaps_op(kernels: int, kernel_seconds: float, phase: str, *,
            after_sync: bool = False) -> Op:
    """The time between the kernels of a pass as an op (kind ``gaps``, shape ``(kernels,)``)."""
    return Op("gaps", "gaps", phase, (kernels,), "", 0.0, 0.0,
              pass_gaps(kernels, kernel_seconds, after_sync=after_sync))
