"""One call per question: simulate an iteration of a TrainJob or of an AICB file.

Each is :func:`~hpnsim.training.program_from_job` / :func:`~hpnsim.training.program_from_aicb`,
then :func:`~hpnsim.training.compile_program`, the engine, and
:func:`~hpnsim.training.account`.
"""

from __future__ import annotations

from hpnsim.collectives.planning.options import CollectiveOptions
from hpnsim.engine import TaskGraph, simulate
from hpnsim.errors import InputError
from hpnsim.training.account import account
from hpnsim.training.compile import compile_program
from hpnsim.training.compiled import CompiledIteration
from hpnsim.training.from_aicb import program_from_aicb
from hpnsim.training.from_job import program_from_job
from hpnsim.training.iteration import IterationResult
from hpnsim.training.job import TrainJob
from hpnsim.workloads.aicb import Workload, load_aicb


def build_iteration_graph(job: TrainJob, fabric, options: CollectiveOptions | None = None, *,
                          tp_algo: str | None = None, dp_algo: str | None = None, gpus=None,
                          graph: TaskGraph | None = None, release: float = 0.0, after=(),
                          **keywords) -> CompiledIteration:
    """Compile one iteration of ``job`` into ``graph``: ``program_from_job`` +
    :func:`compile_program`.

    Parameters
    ----------
    job : TrainJob
    fabric : Fabric
    options : CollectiveOptions, optional
        How its collectives run (default: every default).
    tp_algo, dp_algo, gpus, release, after
        As :func:`compile_program`.
    graph : TaskGraph, optional
        The graph to add to (default a new one).
    **keywords
        Fields of :class:`~hpnsim.collectives.planning.options.CollectiveOptions` replacing those of
        ``options`` (``routing``, ``seed``, ``nccl``, ...).

    Returns
    -------
    CompiledIteration

    Examples
    --------
    >>> from hpnsim.fabrics import hpn7
    >>> fab = hpn7(segments=1, hosts_per_segment=4, backup_hosts=0)
    >>> it = build_iteration_graph(TrainJob("llama3-8b", tp=8, pp=2, dp=2, global_batch=8), fab)
    >>> [sum(p.kind in "FB" for p in stage) for stage in it.passes]   # F, B of 4 micro-batches
    [8, 8]
    """
    return compile_program(program_from_job(job), TaskGraph() if graph is None else graph,
                           fabric, options, gpus=gpus, tp_algo=tp_algo, dp_algo=dp_algo,
                           release=release, after=after, **keywords)


def simulate_iteration(job: TrainJob, fabric, options: CollectiveOptions | None = None, *,
                       tp_algo: str | None = None, dp_algo: str | None = None, gpus=None,
                       **keywords) -> IterationResult:
    """Simulate one iteration of ``job`` on ``fabric``.

    Parameters
    ----------
    job : TrainJob
    fabric : Fabric
    options : CollectiveOptions, optional
        How its collectives run (default: every default).
    tp_algo, dp_algo : str, optional
        Algorithms of the TP and the DP collectives (None: ``options.algo``).
    gpus : array of int, optional
        GPU indices of the job in rank order (default ``0 .. n - 1``).
    **keywords
        Fields of :class:`~hpnsim.collectives.planning.options.CollectiveOptions` replacing those of
        ``options``: ``routing="hpn_dual_plane"``, ``seed=1``, ...

    Returns
    -------
    IterationResult

    Examples
    --------
    >>> from hpnsim.fabrics import hpn7
    >>> fab = hpn7(segments=1, hosts_per_segment=4, backup_hosts=0)
    >>> r = simulate_iteration(TrainJob("llama3-8b", tp=8, pp=2, dp=2, global_batch=8), fab)
    >>> parts = (r.compute_time + sum(r.exposed_comm.values()) + r.bubble + r.optimizer_time
    ...          + r.straggler_time)
    >>> bool(abs(parts - r.iteration_time) < 1e-9 * r.iteration_time)
    True
    """
    it = build_iteration_graph(job, fabric, options, tp_algo=tp_algo, dp_algo=dp_algo,
                               gpus=gpus, **keywords)
    sim = simulate(it.graph, fabric.link_capacity)
    return account(it, sim.start, sim.finish)


def simulate_aicb(workload: Workload, fabric, options: CollectiveOptions | None = None,
                  **keywords) -> IterationResult:
    """Simulate one iteration of a parsed AICB workload (pipeline-parallel ones too).

    Parameters
    ----------
    workload : Workload
        A parsed AICB file (:func:`~hpnsim.workloads.aicb.load_aicb`).
    fabric : Fabric
    options : CollectiveOptions, optional
        How its collectives run (default: every default).
    **keywords
        Fields of :class:`~hpnsim.collectives.planning.options.CollectiveOptions` replacing those of
        ``options`` (``routing``, ``seed``, ...).

    Returns
    -------
    IterationResult

    Examples
    --------
    >>> from hpnsim.fabrics import hpn7
    >>> from hpnsim.workloads.aicb import example_path
    >>> fab = hpn7(segments=1, hosts_per_segment=1, backup_hosts=0)
    >>> r = simulate_aicb(load_aicb(example_path()), fab)
    >>> bool(r.iteration_time > r.compute_time > 0)
    True
    """
    n = workload.to_layout().n_gpus
    if n > fabric.n_gpus:
        raise InputError("fabric", f"has {fabric.n_gpus} GPUs; the workload needs {n}")
    it = compile_program(program_from_aicb(workload), TaskGraph(), fabric, options, **keywords)
    sim = simulate(it.graph, fabric.link_capacity)
    return account(it, sim.start, sim.finish)


def simulate_aicb_file(path, template: str, fabric_options: dict | None = None,
                       options: CollectiveOptions | None = None,
                       **keywords) -> IterationResult:
    """Load an AICB file, size a ``template`` fabric for it, simulate one iteration.

    Parameters
    ----------
    path : str or Path
        The AICB workload file.
    template : str
        Fabric template (``hpn7``, ``fat_tree``, ...), sized for the workload's GPUs
        (:func:`~hpnsim.workloads.sizing.fabric_for_job`).
    fabric_options : dict, optional
        Options of the template's builder.
    options, **keywords
        How its collectives run, as :func:`simulate_aicb`.

    Returns
    -------
    IterationResult

    Examples
    --------
    >>> from hpnsim.workloads.aicb import example_path
    >>> r = simulate_aicb_file(example_path(), "hpn7", routing="hpn_dual_plane")
    >>> bool(r.iteration_time > r.compute_time > 0)
    True
    """
    from hpnsim.workloads.sizing import fabric_for_job

    workload = load_aicb(path)
    fabric = fabric_for_job(template, workload.to_layout().n_gpus, fabric_options)
    return simulate_aicb(workload, fabric, options, **keywords)
