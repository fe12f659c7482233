"""Measured collectives the fidelity page checks hpnsim's NCCL model against, and the NCCL
parameters ``hpnsim calibrate`` fits to them.

One log so far: all_reduce_perf on one host of 8 x A100-SXM4-80GB, one MPI rank per GPU (as a
training framework runs NCCL), NCCL 2.16.2, 32 MiB to 1 GiB
(``data/nccl_tests/all_reduce_perf_a100_1x8_nccl2.16.2.txt``, its provenance in its header).
32 MiB is the size of a TP all-reduce of Megatron-LM's 2021 runs (2048 tokens x h x 2 bytes,
h = 6144: 25 MB).

Usage: imported by experiments/fidelity.py and experiments/fidelity_iteration.py.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np

from hpnsim.fabrics import build_fabric

HERE = Path(__file__).resolve().parent
A100_LOG = HERE / "data" / "nccl_tests" / "all_reduce_perf_a100_1x8_nccl2.16.2.txt"
A100_LOG_SOURCE = ("facebookresearch/gcm (MIT), gcm/tests/health_checks_tests/"
                   "test_check_nccl.py (theap06/gcm @54e1b1d0): all_reduce_perf, 8 x "
                   "A100-SXM4-80GB on one host, one rank per GPU, NCCL 2.16.2; mean of "
                   "out-of-place and in-place")


def a100_host():
    """One 8 x A100 host (NVLink 600 GB/s both ways; its NICs play no part in one host)."""
    return build_fabric("rail_optimized", {"segments": 1, "hosts_per_segment": 1,
                                           "nvlink": "600GB/s", "port_speed": "200G",
                                           "pcie": "Gen4x16"})


def a100_measurement():
    """The log as a :class:`~hpnsim.collectives.nccl.calibrate.Measurement` (seconds per size,
    the mean of the out-of-place and in-place time, as ``hpnsim calibrate`` takes it)."""
    from hpnsim.collectives.nccl.calibrate import Measurement
    from hpnsim.workloads.nccl_tests import load_nccl_tests

    (log,) = load_nccl_tests([A100_LOG], fabric=a100_host())
    times = (log.column("oop_time") + log.column("ip_time")) / 2
    return Measurement(str(A100_LOG.name), log.op, range(log.n_gpus), log.column("size"),
                       np.asarray(times), lines=tuple(r.line for r in log.rows))


@cache
def a100_calibration():
    """What ``hpnsim calibrate`` fits to the log from NCCL's A100 defaults (the parameters
    the sizes pin down: a latency scale on NCCL's tables and NVLink's payload efficiency)."""
    from hpnsim.collectives.nccl.calibrate import calibrate
    from hpnsim.collectives.nccl.params import NcclParams

    return calibrate(a100_host(), [a100_measurement()], NcclParams.for_gpu("a100"),
                     simulate=False)
