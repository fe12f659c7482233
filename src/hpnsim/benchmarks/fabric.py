"""Fabric benchmark: build the >= 131,072-GPU multi-pod HPN 7.0 fabric and a k=56 fat-tree.

Full run: 9 pods x 15 segments x 1,024 GPUs = 138,240 GPUs (target < 5 s, < 2 GB peak).
Quick run: 2 pods. Peak RSS is the whole process's high-water mark so far.
"""

from __future__ import annotations

from hpnsim.benchmarks import Measurement, timed


def run(quick: bool = False) -> list[Measurement]:
    """Build the big fabrics; report time, peak memory and sizes.

    >>> [m.name for m in run(quick=True)][:1]
    ['hpn7 build (2 pods)']
    """
    from hpnsim.fabrics import fat_tree, hpn7

    pods = 2 if quick else 9
    m_hpn, fabric = timed(f"hpn7 build ({pods} pods)", lambda: hpn7(pods=pods),
                          target_seconds=5.0)
    m_hpn.details.update(gpus=fabric.n_gpus, nodes=fabric.n_nodes, links=fabric.n_links,
                         target_peak_mb=2048)
    m_csr, _ = timed("hpn7 adjacency + link index", lambda: (fabric.out_ptr,
                                                             fabric.link_ids([0], [1]),
                                                             fabric.gpu_tor))
    k = 16 if quick else 56
    m_ft, tree = timed(f"fat_tree build (k={k})", lambda: fat_tree(k))
    m_ft.details.update(gpus=tree.n_gpus, links=tree.n_links)
    return [m_hpn, m_csr, m_ft]
