"""Fabric benchmark: build the 131,072-GPU multi-pod HPN 7.0 fabric, with and without its
frontend network, and a k=56 fat-tree.

Full run: exactly 131,072 GPUs = 8 full pods x 15 segments + 8 segments of a 9th pod, x
1,024 GPUs (target < 5 s, < 2 GB peak); then the same with ``frontend=True`` (16,384 hosts'
CPUs and frontend NICs, 787 storage hosts, 1,038 frontend switches). Quick run: 2 pods, the
second pod one segment. Then the frontend paths of a checkpoint: every GPU's host to a
storage host (GPU ``g`` to storage ``g mod storage_hosts``). Peak RSS is the whole process's high-water mark so far; the builds run
smallest first, so each figure is that build's peak (the fabric before it is freed).
"""

from __future__ import annotations

import gc

from hpnsim.benchmarks import Measurement, timed


def run(quick: bool = False) -> list[Measurement]:
    """Build the big fabrics; report time, peak memory and sizes.

    >>> [m.name for m in run(quick=True)][:2]
    ['hpn7 build (11,264 GPUs)', 'hpn7 + frontend build (11,264 GPUs)']
    """
    import numpy as np

    from hpnsim.fabrics import fat_tree, hpn7, storage_paths

    if quick:
        gpus, sizing = 11_264, {"pods": 2, "segments": 10, "last_pod_segments": 1}
    else:
        gpus, sizing = 131_072, {"pods": 9, "segments": 15, "last_pod_segments": 8}
    out = []
    for frontend in (False, True):
        gc.collect()
        label = "hpn7 + frontend" if frontend else "hpn7"
        m, fabric = timed(f"{label} build ({gpus:,} GPUs)",
                          lambda frontend=frontend: hpn7(frontend=frontend, **sizing),
                          target_seconds=5.0)
        assert fabric.n_gpus == gpus
        m.details.update(gpus=fabric.n_gpus, nodes=fabric.n_nodes, links=fabric.n_links,
                         switches=int(fabric.switches().size), target_peak_mb=2048, **sizing)
        if frontend:
            storage = fabric.meta["frontend"]["storage_hosts"]
            m.details.update(storage_hosts=storage,
                             frontend_switches=int(fabric.switches(network=1).size))
            gpu = np.arange(fabric.n_gpus)
            m_paths, (ptr, _) = timed(f"frontend checkpoint paths ({gpus:,} flows)",
                                      lambda f=fabric, g=gpu, s=storage:
                                      storage_paths(f, g, g % s))
            m_paths.details.update(links=int(ptr[-1]))
        out.append(m)
        if not frontend:
            m_csr, _ = timed("hpn7 adjacency + link index",
                             lambda f=fabric: (f.out_ptr, f.link_ids([0], [1]), f.gpu_tor))
            out.append(m_csr)
        del fabric
    out.insert(2, out.pop(1))  # builds first, then the lookups
    out.append(m_paths)
    k = 16 if quick else 56
    m_ft, tree = timed(f"fat_tree build (k={k})", lambda: fat_tree(k))
    m_ft.details.update(gpus=tree.n_gpus, links=tree.n_links)
    return [*out, m_ft]
