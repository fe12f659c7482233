"""The synthetic Lingjun job mix: the published shape, valid jobs, one mix per seed."""

import numpy as np
import pytest

from hpnsim.errors import InputError
from hpnsim.scenario.spec import JobSpec, parse_scenario
from hpnsim.workloads import models
from hpnsim.workloads.jobmix import lingjun_mix, mix_summary
from hpnsim.workloads.layout import make_layout

H800_HBM = 80e9          # NVIDIA H800 SXM: 80 GB HBM3


@pytest.fixture(scope="module")
def default_mix():
    return lingjun_mix(300, seed=0, hours=24, gpus_available=847 * 8)


def gpus_of(job):
    return job["tp"] * job["pp"] * job["dp"]


def brute_force_peak(jobs):
    """Running jobs counted at every arrival instant (the count only rises at arrivals)."""
    start = np.array([j["arrival"] for j in jobs])
    end = start + np.array([j["duration"] for j in jobs])
    return max(int(((start <= t) & (t < end)).sum()) for t in start)


def test_default_mix_has_the_published_shape(default_mix):
    gpus = np.array([gpus_of(j) for j in default_mix])
    assert len(default_mix) == 300
    assert (gpus >= 128).mean() > 0.10                       # "more than 10% on >= 128 GPUs"
    assert gpus.min() >= 1 and gpus.max() <= 512              # "1 to 512 GPUs"
    assert {1, 8, 512} <= set(gpus.tolist())
    assert brute_force_peak(default_mix) >= 30                # "30+ concurrent at peak"
    arrivals = [j["arrival"] for j in default_mix]
    assert arrivals == sorted(arrivals) and 0 <= arrivals[0] and arrivals[-1] < 24 * 3600


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_peak_concurrency_over_seeds(seed):
    assert brute_force_peak(lingjun_mix(300, seed=seed)) >= 30


def test_large_sample_statistics():
    jobs = lingjun_mix(4000, seed=5, hours=24 * 13)
    gpus = np.array([gpus_of(j) for j in jobs])
    share = (gpus >= 128).mean()
    assert abs(share - 0.15) < 3 * np.sqrt(0.15 * 0.85 / 4000) and share > 0.10
    # Little's law: job-seconds over the horizon is the mean concurrency asked for (28)
    busy = sum(j["duration"] for j in jobs)
    assert busy / (24 * 13 * 3600) == pytest.approx(28, rel=0.08)
    # Poisson arrivals: exponential gaps, coefficient of variation 1
    gaps = np.diff([j["arrival"] for j in jobs])
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.06)
    assert set(gpus.tolist()) == {1, 2, 4, 8, 16, 32, 64, 128, 256, 512}


def test_summary_matches_brute_force(default_mix):
    s = mix_summary(default_mix)
    assert s["jobs"] == 300 and s["peak_concurrency"] == brute_force_peak(default_mix)
    gpus = np.array([gpus_of(j) for j in default_mix])
    assert s["share_ge_128_gpus"] == pytest.approx((gpus >= 128).mean())
    hours = sum(gpus_of(j) * j["duration"] for j in default_mix)
    assert s["gpu_hours"] == pytest.approx(hours / 3600)


def test_every_job_is_a_valid_scenario_job(default_mix):
    for job in default_mix:
        spec = JobSpec.model_validate(job)
        assert spec.gpu_count == gpus_of(job) and spec.duration == job["duration"] > 0
        make_layout(job["model"], tp=job["tp"], pp=job["pp"], dp=job["dp"],
                    global_batch=job["global_batch"], n_gpus=gpus_of(job), gpus_per_host=8)
        assert job["tp"] <= 8 and 8 % job["tp"] == 0
        # the training state (16 B per parameter, ZeRO paper) fits in half of each GPU's HBM
        params = models.get(job["model"]).published_parameters
        assert params * 16 / (job["tp"] * job["pp"]) <= 0.5 * H800_HBM * 1.02
    # pipelines only for models that do not fit a host, i.e. the 65-70B ones
    assert {j["model"] for j in default_mix if j["pp"] > 1} == {"llama-65b", "llama3-70b"}
    assert len({j["name"] for j in default_mix}) == 300
    scenario = parse_scenario({"jobs": default_mix[:5]})
    assert [j.arrival for j in scenario.jobs] == [j["arrival"] for j in default_mix[:5]]


def test_deterministic_per_seed():
    assert lingjun_mix(50, seed=3) == lingjun_mix(50, seed=3)
    assert lingjun_mix(50, seed=3) != lingjun_mix(50, seed=4)


def test_small_cluster_caps_the_job_size():
    jobs = lingjun_mix(200, seed=0, gpus_available=64)
    assert max(gpus_of(j) for j in jobs) == 64


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"n_jobs": 0}, "n_jobs"), ({"hours": -1.0}, "hours"), ({"seed": -2}, "seed"),
    ({"gpus_available": 0}, "gpus_available"), ({"share_large": 1.5}, "share_large"),
])
def test_bad_arguments_name_the_field(kwargs, field):
    with pytest.raises(InputError, match=f"^{field}:"):
        lingjun_mix(**kwargs)
