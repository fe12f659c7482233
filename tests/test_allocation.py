"""GPU allocators: packed, topology-aware (fewest ToRs, then Aggs), random, given."""

import itertools

import numpy as np
import pytest

from hpnsim.errors import InputError
from hpnsim.fabrics import from_lingjun, hpn7
from hpnsim.workloads.allocation import (
    allocate,
    choose_hosts,
    given,
    host_groups,
    hosts_of,
    packed,
    random_hosts,
    topology_aware,
)


@pytest.fixture(scope="module")
def lingjun():
    return from_lingjun()


def small_hpn():
    return hpn7(segments=3, hosts_per_segment=4, backup_hosts=0, tor_uplinks=2, aggs_per_plane=2)


def tor_nodes(fabric, gpus):
    """The ToR switches the job's NICs plug into, read from the fabric's links."""
    return set(fabric.gpu_tor[np.asarray(gpus)].ravel().tolist()) - {-1}


def free_per_tor(fabric, free):
    """Free hosts under each ToR node (Lingjun: one ToR per host), from the fabric's links."""
    host_tor = fabric.gpu_tor[:: fabric.gpus_per_host, 0]
    return {t: int((free & (host_tor == t)).sum()) for t in np.unique(host_tor).tolist()}


def test_hpn_segment_is_the_tor_group():
    f = small_hpn()
    seg = f.node_segment[f.gpu_tor[:: f.gpus_per_host, 0]]
    assert host_groups(f).tor_group.tolist() == seg.tolist() == [0] * 4 + [1] * 4 + [2] * 4


def test_hpn_packed_spans_segments_topology_aware_does_not():
    f = small_hpn()
    free = np.ones(12, bool)
    free[[0, 1, 4]] = False           # segment 0: 2 free, segment 1: 3 free, segment 2: 4 free
    job = 4 * 8
    pk, ta = packed(f, free, job), topology_aware(f, free, job)
    assert hosts_of(pk, 8).tolist() == [2, 3, 5, 6]
    assert hosts_of(ta, 8).tolist() == [8, 9, 10, 11]
    assert len(set(f.node_segment[f.gpu_tor[ta, 0]].tolist())) == 1
    assert len(set(f.node_segment[f.gpu_tor[pk, 0]].tolist())) == 2
    # 3 hosts: segment 1 fits exactly (tightest), leaving segment 2 whole for a larger job
    assert hosts_of(topology_aware(f, free, 24), 8).tolist() == [5, 6, 7]


def test_lingjun_64_gpus_land_under_one_tor(lingjun):
    free = np.ones(lingjun.n_hosts, bool)
    free[0] = False                           # the first ToR keeps 7 of its 8 hosts free
    counts = free_per_tor(lingjun, free)
    assert counts[lingjun.gpu_tor[0, 0]] == 7 and max(counts.values()) == 8
    gpus = topology_aware(lingjun, free, 64, tp=8)
    assert gpus.size == 64 and len(tor_nodes(lingjun, gpus)) == 1
    assert counts[next(iter(tor_nodes(lingjun, gpus)))] == 8
    # packed takes hosts 1..8: the first ToR's 7 and one of the next
    assert len(tor_nodes(lingjun, packed(lingjun, free, 64))) == 2


@pytest.mark.parametrize("seed", range(5))
def test_lingjun_fewest_tors_and_psws(lingjun, seed):
    rng = np.random.default_rng(seed)
    free = rng.random(lingjun.n_hosts) < 0.4
    counts = free_per_tor(lingjun, free)
    tor_psw = {t: int(lingjun.node_pod[t]) for t in counts}
    for hosts_needed in (3, 9, 20, 41):
        gpus = topology_aware(lingjun, free, hosts_needed * 8, tp=8)
        used = hosts_of(gpus, 8)
        assert used.size == hosts_needed and free[used].all()
        # fewest ToRs: the k fullest ToRs are the best any placement can do
        k = int(np.searchsorted(np.cumsum(sorted(counts.values(), reverse=True)),
                                hosts_needed)) + 1
        assert len(tor_nodes(lingjun, gpus)) == k
        # fewest PSWs among placements on k ToRs: try every set of PSWs
        fewest = min(len(s) for r in (1, 2, 3) for s in itertools.combinations(range(3), r)
                     if sum(sorted((c for t, c in counts.items() if tor_psw[t] in s),
                                   reverse=True)[:k]) >= hosts_needed)
        assert len({tor_psw[t] for t in tor_nodes(lingjun, gpus)}) == fewest
        # rank order: each ToR's hosts are consecutive ranks
        seq = lingjun.gpu_tor[gpus[::8], 0].tolist()
        assert sum(a != b for a, b in itertools.pairwise(seq)) == k - 1


def brute_force_best(tor_group, agg_group, free, need):
    """(ToR groups, Agg groups) of the best placement over every subset of free hosts."""
    hosts = np.flatnonzero(free)
    return min((len({tor_group[h] for h in s}), len({agg_group[tor_group[h]] for h in s}))
               for s in itertools.combinations(hosts.tolist(), need))


def test_choose_hosts_matches_brute_force():
    rng = np.random.default_rng(7)
    for _ in range(300):
        n_tors = int(rng.integers(1, 6))
        sizes = rng.integers(1, 4, n_tors)            # hosts per ToR vary, as in Lingjun
        tor_group = np.repeat(np.arange(n_tors), sizes)
        agg_group = rng.integers(0, 3, n_tors)
        free = rng.random(tor_group.size) < 0.7
        if not free.any():
            continue
        need = int(rng.integers(1, free.sum() + 1))
        got = choose_hosts(tor_group, agg_group, free, need)
        assert got.size == need and len(set(got.tolist())) == need and free[got].all()
        score = (len(set(tor_group[got].tolist())), len(set(agg_group[tor_group[got]].tolist())))
        assert score == brute_force_best(tor_group, agg_group, free, need)
        assert choose_hosts(tor_group, agg_group, free, int(free.sum()) + 1) is None


def test_tiny_lingjun_files(tmp_path):
    """Through a fabric built from a CSV: uneven ToRs under three PSWs."""
    rows = ["ip,DSW,PSW,ASW"]
    layout = {("P1", "S1"): 3, ("P1", "S2"): 1, ("P2", "S1"): 2, ("P2", "S3"): 2, ("P3", "S1"): 4}
    for n, ((psw, asw), hosts) in enumerate(layout.items()):
        rows += [f"h{n}{i},G1,{psw},{asw}" for i in range(hosts)]
    path = tmp_path / "topo.csv"
    path.write_text("\n".join(rows) + "\n")
    f = from_lingjun(str(path), gpus_per_host=2)
    groups = host_groups(f)
    assert np.bincount(groups.tor_group).tolist() == [3, 1, 2, 2, 4]
    assert groups.agg_group.tolist() == [0, 0, 1, 1, 2]
    free = np.ones(f.n_hosts, bool)
    free[[0, 8]] = False                  # P1/S1 and P3/S1 lose a host each
    for need in range(1, int(free.sum()) + 1):
        gpus = topology_aware(f, free, need * 2, tp=2)
        used = hosts_of(gpus, 2)
        score = (len(set(groups.tor_group[used].tolist())),
                 len(set(groups.agg_group[groups.tor_group[used]].tolist())))
        assert score == brute_force_best(groups.tor_group, groups.agg_group, free, need)
    # 4 hosts need 2 ToRs; only P2 holds 4 free hosts on 2 ToRs (P1: 2 + 1, P3: one ToR)
    assert hosts_of(topology_aware(f, free, 8), 2).tolist() == [4, 5, 6, 7]


def test_random_is_seeded_and_free(lingjun):
    free = np.random.default_rng(1).random(lingjun.n_hosts) < 0.5
    a = random_hosts(lingjun, free, 128, seed=11)
    assert a.tolist() == random_hosts(lingjun, free, 128, seed=11).tolist()
    assert a.tolist() != random_hosts(lingjun, free, 128, seed=12).tolist()
    used = hosts_of(a, 8)
    assert used.size == 16 and free[used].all()
    # one generator across calls: the second draw differs from the first, and replays
    draws = [random_hosts(lingjun, free, 8, seed=g) for g in [np.random.default_rng(5)] * 2]
    again = [random_hosts(lingjun, free, 8, seed=g) for g in [np.random.default_rng(5)] * 2]
    assert [d.tolist() for d in draws] == [d.tolist() for d in again]


def test_a_job_too_big_waits():
    f = small_hpn()
    free = np.zeros(12, bool)
    free[[3, 7]] = True
    for policy in ("packed", "topology_aware", "random"):
        assert allocate(policy, f, free, 17) is None           # needs 3 hosts, 2 are free
        assert hosts_of(allocate(policy, f, free, 9), 8).tolist() == [3, 7]
    with pytest.raises(InputError, match="^gpus: the job needs 97 GPUs, the fabric has 96"):
        packed(f, free, 97)
    with pytest.raises(InputError, match="^tp:"):
        topology_aware(f, free, 12, tp=8)


def test_a_job_smaller_than_a_host_takes_the_first_gpus_of_one_host():
    f = small_hpn()
    free = np.ones(12, bool)
    free[0] = False
    assert packed(f, free, 4, tp=4).tolist() == [8, 9, 10, 11]


def test_given_checks_the_list():
    f = small_hpn()
    free = np.ones(12, bool)
    free[1] = False
    assert given(f, free, [16, 17, 0, 1], tp=2).tolist() == [16, 17, 0, 1]
    assert given(f, free, [8, 9], tp=2) is None                     # host 1 is busy
    with pytest.raises(InputError, match="^tp: TP group \\[7, 16\\] spans hosts"):
        given(f, free, [7, 16], tp=2)
    with pytest.raises(InputError, match="^gpus: GPU 96 is not in the fabric"):
        given(f, free, [96])
    with pytest.raises(InputError, match="^gpus: need exactly 3"):
        allocate("given", f, free, 3, gpus=[0, 1])
