"""experiments/measured_collectives.py: the imported 8 x A100 nccl-tests log reads back as its
source printed it, and the calibration fitted to it reproduces the log within its stated rms
error (the closed form at the fitted parameters, recomputed here per size)."""

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))

#: facebookresearch/gcm's fixture sample_single_success_output, as printed: size, out-of-place
#: and in-place time (us)
SOURCE_ROWS = [(33554432, 344.8, 349.5), (67108864, 557.4, 556.2), (134217728, 1149.9, 1149.8),
               (268435456, 2106.1, 2106.0), (536870912, 4145.6, 4138.5),
               (1073741824, 8109.1, 8109.7)]


@pytest.fixture(scope="module")
def measured():
    import measured_collectives

    return measured_collectives


def test_log_reads_back_exactly(measured):
    from hpnsim.workloads.nccl_tests import load_nccl_tests

    (log,) = load_nccl_tests([measured.A100_LOG])
    assert (log.op, log.n_gpus, log.n_hosts) == ("allreduce", 8, 1)
    assert log.column("size").tolist() == [row[0] for row in SOURCE_ROWS]
    assert np.allclose(log.column("oop_time"), [row[1] * 1e-6 for row in SOURCE_ROWS],
                       rtol=0, atol=1e-12)
    assert np.allclose(log.column("ip_time"), [row[2] * 1e-6 for row in SOURCE_ROWS],
                       rtol=0, atol=1e-12)
    m = measured.a100_measurement()
    assert np.allclose(m.times, [(a + b) / 2 * 1e-6 for _, a, b in SOURCE_ROWS], rtol=1e-12)


def test_calibration_reproduces_the_log(measured):
    from hpnsim.collectives.nccl.measurement import predict

    c = measured.a100_calibration()
    assert set(c.fitted) == {"latency_scale", "nvlink_efficiency"}
    m = measured.a100_measurement()
    errors = predict(measured.a100_host(), m, c.nccl) / m.times - 1
    rms = float(np.sqrt(np.mean(np.log1p(errors) ** 2)))
    assert rms == pytest.approx(c.rms_error(), rel=0.05)
    # the fit is worth having: it beats NCCL's defaults on the same sizes
    from hpnsim.collectives.nccl.params import NcclParams

    default = predict(measured.a100_host(), m, NcclParams.for_gpu("a100")) / m.times - 1
    assert rms < float(np.sqrt(np.mean(np.log1p(default) ** 2)))
