"""Twin links merged (engine.twins): every finish time stays bit for bit the unmerged
run's, the tighter twin is the one kept, and links that differ in a task or a usage stay."""

import numpy as np

from hpnsim.engine import Simulation, TaskGraph
from hpnsim.engine.twins import merge_twin_links


def _template(rng, n_links, twins):
    """One iteration: delays and transfers over ``n_links`` base links; link ``n_links + i``
    repeats the entries of base link ``twins[i]`` exactly (task and usage)."""
    g = TaskGraph()
    prev = g.add_delay(float(rng.uniform(0.1, 1.0)))
    for _ in range(int(rng.integers(2, 6))):
        rows = []
        for _ in range(int(rng.integers(1, 4))):
            links = rng.choice(n_links, int(rng.integers(1, 4)), replace=False).tolist()
            usage = rng.choice([1.0, 2.0, 0.5], len(links)).tolist()
            extra = [(n_links + i, usage[links.index(b)]) for i, b in enumerate(twins)
                     if b in links]
            links += [lk for lk, _ in extra]
            usage += [u for _, u in extra]
            rows.append(g.add_transfer(links, usage, float(rng.uniform(1.0, 50.0)),
                                       weight=float(rng.choice([1.0, 2.0])), deps=[prev]))
        prev = g.add_delay(float(rng.uniform(0.0, 0.5)), deps=rows)
    return g


def _finish(templates, capacity, copies, priorities):
    """Finish times of ``copies`` chained copies of each template (one job each)."""
    g = TaskGraph()
    for arrays, count, prio in zip(templates, copies, priorities, strict=True):
        g.append_chain(arrays, count, chain=[arrays.kind.size - 1], priority=prio)
    sim = Simulation(g, capacity)
    sim.run()
    return sim.finish_times()


def test_merged_twins_give_the_same_finish_times_bit_for_bit():
    rng = np.random.default_rng(5)
    for trial in range(30):
        n_links = int(rng.integers(3, 9))
        twins = rng.choice(n_links, int(rng.integers(1, n_links + 1))).tolist()
        templates = [_template(rng, n_links, twins).arrays(n_links + len(twins))
                     for _ in range(int(rng.integers(1, 4)))]
        cap = rng.uniform(5.0, 50.0, n_links + len(twins))
        copies = rng.integers(1, 5, len(templates)).tolist()
        prio = (rng.integers(0, 2, len(templates)) if trial % 2
                else np.zeros(len(templates), np.int64)).tolist()
        merged, merged_cap = merge_twin_links(templates, cap)
        # each planted twin's entries are gone (base links may be twins by chance too)
        planted = sum(int(np.sum(a.links >= n_links)) for a in templates)
        assert merged_cap.size <= n_links
        assert sum(a.links.size for a in merged) <= sum(a.links.size for a in templates) - planted
        want = _finish(templates, cap, copies, prio)
        assert np.all(np.isfinite(want))
        np.testing.assert_array_equal(_finish(merged, merged_cap, copies, prio), want)


def test_the_tighter_twin_is_kept_and_decides_the_rate():
    # one transfer of 12 B over links 0 (6 B/s) and 1 (3 B/s): twins, 1 is tighter
    g = TaskGraph()
    g.add_transfer([0, 1], 1.0, 12.0)
    (a,), cap = merge_twin_links([g.arrays(2)], [6.0, 3.0])
    assert cap.tolist() == [3.0] and a.links.tolist() == [0]
    assert _finish([a], cap, [1], [0]).tolist() == [4.0]    # 12 B at 3 B/s


def test_links_that_differ_in_a_task_or_a_usage_are_kept():
    g = TaskGraph()
    # link 0 and 1 differ in usage; link 2 is crossed by a second task as well
    g.add_transfer([0, 1, 2], [1.0, 2.0, 1.0], 10.0)
    g.add_transfer([2], 1.0, 10.0)
    (a,), cap = merge_twin_links([g.arrays(3)], [1.0, 1.0, 1.0])
    assert cap.size == 3 and a.links.tolist() == [0, 1, 2, 2]
    # the same links in two graphs are not twins of links one graph alone crosses
    h = TaskGraph()
    h.add_transfer([0, 1], 1.0, 10.0)
    k = TaskGraph()
    k.add_transfer([1], 1.0, 10.0)
    _, cap = merge_twin_links([h.arrays(2), k.arrays(2)], [1.0, 1.0])
    assert cap.size == 2


def test_runs_are_grouped_exactly_even_when_every_hash_collides(monkeypatch):
    from hpnsim.engine import twins

    rng = np.random.default_rng(2)
    lengths = rng.integers(1, 4, 60)
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    values = rng.integers(0, 3, bounds[-1])
    runs = [values[bounds[i]:bounds[i + 1]].tolist() for i in range(60)]
    for mix in (twins._mix, lambda x: np.zeros_like(x)):    # real hashes, then all collide
        monkeypatch.setattr(twins, "_mix", mix)
        group = twins._equal_runs(values, bounds)
        for i in range(60):
            for j in range(60):
                assert (group[i] == group[j]) == (runs[i] == runs[j])
