"""Crux path selection: replayed by hand (each connection's candidates routed here with
route(conn=c)), least congested choice, and intensity order never hurting the more
intense job."""

import numpy as np
import pytest

from hpnsim.errors import InputError
from hpnsim.fabrics import LinkKind, fat_tree
from hpnsim.routing import route
from hpnsim.sched.jobs import SchedJob
from hpnsim.sched.paths import select_paths

NETWORK = (LinkKind.ACCESS, LinkKind.UPLINK, LinkKind.CORE)


def make_jobs(fabric, rng, n_jobs=5):
    pool = [(0, 15), (1, 14), (4, 11), (2, 9)]       # host pairs in different pods
    jobs = []
    for j in range(n_jobs):
        pairs = [pool[i] for i in rng.choice(len(pool), size=3)]
        src, dst = zip(*pairs, strict=True)
        paths = route(fabric, list(src), list(dst))
        jobs.append(SchedJob.from_paths(f"j{j}", int(rng.integers(1, 64)),
                                        float(rng.uniform(0.1, 1.0)), paths,
                                        rng.uniform(1e8, 1e9, size=3), fabric.n_links))
    return jobs


def congestion(fabric, links, load):
    links = [e for e in links if fabric.link_kind[e] in NETWORK]
    return max(load[e] / fabric.link_capacity[e] for e in links)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_least_congested_in_intensity_order(seed):
    f = fat_tree(4)
    rng = np.random.default_rng(seed)
    jobs = make_jobs(f, rng)
    choice = select_paths(jobs, f, candidates=6)
    intensity = [j.intensity(f.link_capacity) for j in jobs]
    assert choice.order.tolist() == sorted(range(5), key=lambda j: -intensity[j])
    load = np.zeros(f.n_links)
    seen = {}            # (src, dst) -> congestion of each earlier job's choice
    for j in choice.order.tolist():
        job, picked = jobs[j], choice.paths[j]
        for i in range(job.flows.n_flows):
            s, d = int(job.flows.src[i]), int(job.flows.dst[i])
            options = [route(f, [s], [d], conn=[c]).path(0).tolist() for c in range(6)]
            levels = [congestion(f, links, load) for links in options]
            mine = congestion(f, picked.path(i).tolist(), load)
            assert picked.path(i).tolist() in options
            assert mine == pytest.approx(min(levels))              # least congested
            assert mine == pytest.approx(choice.congestion[j][i])
            # a more intense job that could choose among the same paths never got a more
            # congested one than this job gets now
            for earlier in seen.get((s, d), []):
                assert earlier <= mine + 1e-12
            seen.setdefault((s, d), []).append(mine)
            for e in picked.path(i).tolist():
                load[e] += job.flow_bytes[i]
        # the job now carries its bytes on the chosen links
        expect = picked.link_load(f.n_links, sizes=job.flow_bytes)
        got = np.zeros(f.n_links)
        got[choice.jobs[j].links] = choice.jobs[j].link_bytes
        assert np.allclose(got, expect)


def test_chosen_source_ports_reproduce_the_paths_under_ecmp():
    f = fat_tree(4)
    jobs = make_jobs(f, np.random.default_rng(4), n_jobs=3)
    choice = select_paths(jobs, f, candidates=5)
    for picked in choice.paths:
        again = route(f, picked.src, picked.dst, sport=picked.sport)
        assert again.links.tolist() == picked.links.tolist()


def test_bad_input():
    f = fat_tree(4)
    plain = SchedJob("a", 1, 1.0, [0], [1.0])
    with pytest.raises(InputError, match="jobs"):
        select_paths([plain], f)
    job = SchedJob.from_paths("b", 1, 1.0, route(f, [0], [15]), [1.0], f.n_links)
    with pytest.raises(InputError, match="candidates"):
        select_paths([job], f, candidates=0)
    with pytest.raises(InputError, match="order"):
        select_paths([job], f, order=[1])
