"""hpnsim: design, simulate and schedule the networks that train large language models.

The public entry points, by the question they answer (``import hpnsim`` stays cheap: each
name below loads its subpackage on first use; ``dir(hpnsim)`` lists them all).

>>> import hpnsim as hs

**A whole run** -- ``Scenario`` (one YAML or dict: fabric, jobs, routing, seed),
``load_scenario(path)`` (read and validate a YAML file), ``run(scenario) -> RunResult``:

>>> sc = hs.Scenario(fabric={"template": "hpn7", "segments": 1, "hosts_per_segment": 2,
...                          "backup_hosts": 0}, jobs=[{"model": "llama3-8b", "tp": 8, "dp": 2}])
>>> r = hs.run(sc); r.fabric["gpus"], len(r.jobs[0].iterations)
(16, 1)

**Fabrics** -- ``build_fabric(template, options)`` (``hpnsim fabric`` lists the templates),
``fabrics.FabricState`` (links up or down and capacities while a run goes on):

>>> f = hs.build_fabric("hpn7", {"segments": 1, "hosts_per_segment": 2, "backup_hosts": 0})
>>> f.n_gpus, hs.fabrics.FabricState(f).set_down(["pod0/seg0/host0/nic-r0"]).down_links.size
(16, 6)

**Routing** -- ``route(fabric, src, dst, policy)``: one path (link ids) per flow:

>>> p = hs.route(f, [0, 0], [8, 1], "hpn_dual_plane")
>>> p.hop_counts().tolist()      # GPU 0 -> 8 crosses its ToR; GPU 0 -> 1 stays on NVLink
[4, 2]

**Collectives** -- ``run_collective(fabric, op, gpus, size)``: one collective alone on a fabric:

>>> c = hs.run_collective(f, "allreduce", range(16), 2**30, algo="ring", routing="hpn_dual_plane")
>>> c.algo, round(c.busbw / 1e9, 1), c.hash_collisions      # bus bandwidth in GB/s
('ring', 162.8, 0)

**Training** -- ``TrainJob(model, tp=, pp=, dp=, ...)``, ``simulate_iteration(job, fabric)``:

>>> job = hs.TrainJob("llama3-8b", tp=8, dp=2, global_batch=4)
>>> it = hs.simulate_iteration(job, f); round(it.iteration_time * 1e3, 1), round(it.mfu, 2)
(408.3, 0.29)

**Engine** -- ``TaskGraph`` (transfers on links, delays, dependencies) and
``simulate(graph, capacities)`` (max-min fair sharing, event by event):

>>> g = hs.TaskGraph(); a = g.add_transfer([0], 1.0, 100.0); b = g.add_delay(1.0, deps=[a])
>>> hs.simulate(g, [10.0]).finish.tolist()      # 100 bytes at 10 bytes/s, then 1 s
[10.0, 11.0]

Subpackages (also loaded on first use): ``units``, ``errors``, ``fabrics``, ``engine``,
``routing``, ``collectives``, ``workloads``, ``training``, ``sched``, ``faults``,
``scenario``, ``report``, ``sweep``, ``demo``.

>>> hs.units.parse_bandwidth("400Gbps")
50000000000.0
"""

import importlib

from hpnsim import errors, units
from hpnsim.errors import HpnsimError, InputError

__version__ = "0.1.0"

_SUBPACKAGES = ("fabrics", "engine", "routing", "collectives", "workloads", "training", "sched",
               "faults", "scenario", "report", "sweep", "demo")
#: top-level shortcuts: name -> (module, attribute)
_SHORTCUTS = {
    "simulate": ("hpnsim.engine", "simulate"),
    "TaskGraph": ("hpnsim.engine", "TaskGraph"),
    "route": ("hpnsim.routing", "route"),
    "run_collective": ("hpnsim.collectives", "run_collective"),
    "simulate_iteration": ("hpnsim.training", "simulate_iteration"),
    "TrainJob": ("hpnsim.training", "TrainJob"),
    "build_fabric": ("hpnsim.fabrics", "build_fabric"),
    "run": ("hpnsim.scenario", "run"),
    "Scenario": ("hpnsim.scenario", "Scenario"),
    "load_scenario": ("hpnsim.scenario", "load_scenario"),
}

__all__ = ["HpnsimError", "InputError", "errors", "units", "__version__",
           *_SUBPACKAGES, *_SHORTCUTS]


def __getattr__(name: str):
    if name in _SUBPACKAGES:
        return importlib.import_module(f"hpnsim.{name}")
    if name in _SHORTCUTS:
        module, attribute = _SHORTCUTS[name]
        return getattr(importlib.import_module(module), attribute)
    raise AttributeError(f"module 'hpnsim' has no attribute {name!r}")


def __dir__():
    """The public names, the lazily loaded ones included (``dir(hpnsim)``)."""
    return list(__all__)
