"""A scenario's jobs under ``engine: packet`` (:func:`simulate_jobs_packet`): the task graph
the flow engine would run (every iteration of every job, compiled as for the flow engine:
compute waits, collectives' transfers with their member paths, pipeline messages) moved as
packets (:func:`hpnsim.collectives.packet.graph.run_graph_packet`), accounted as the flow
engine's run is (:func:`hpnsim.training.account` on its start and finish times).

Before anything is simulated the graph's packet hops are counted and a run beyond
``engine.max_packets`` (``--max-packets``) is refused in one line. The flow engine then runs
the same graph once, for the comparison the result carries (``flow_makespan``) and to space
the queue samples; the packet run follows. NVLink and PCIe run at the first job's NCCL
efficiencies (jobs of one GPU model share them).
"""

from __future__ import annotations

from hpnsim.errors import InputError
from hpnsim.scenario.yaml import located

__all__ = ["simulate_jobs_packet"]


def simulate_jobs_packet(prepared, graph, built: dict) -> tuple[dict, dict, dict]:
    """Run the compiled jobs' ``graph`` as packets.

    Parameters
    ----------
    prepared : PreparedScenario
        Its fabric, lines and ``engine:`` settings.
    graph : TaskGraph
        Every iteration of the jobs in ``built``.
    built : dict
        Job index -> its compiled iterations (:class:`~hpnsim.training.CompiledIteration`).

    Returns
    -------
    tuple
        ``(iterations, finish, packet)``: per job its accounted iterations and its finish
        time, and the packet figures of the run (``flow_makespan``: the flow engine's time
        for the same graph).

    Examples
    --------
    >>> from hpnsim.scenario.runner import run
    >>> r = run({"fabric": {"template": "hpn7", "segments": 1, "hosts_per_segment": 2,
    ...                     "backup_hosts": 0}, "engine": "packet",
    ...          "jobs": [{"model": "llama3-8b", "tp": 8, "dp": 2, "global_batch": 2,
    ...                    "seq_len": 512, "bucket_params": 200000000}]})
    >>> r.packet["drops"], r.packet["events"] > 0
    (0, True)
    >>> bool(abs(r.jobs[0].iteration_time / r.packet["flow_makespan"] - 1) < 0.05)
    True
    """
    from hpnsim.collectives.packet.graph import check_graph_work, packet_summary, run_graph_packet
    from hpnsim.engine import simulate
    from hpnsim.training import account

    scenario, fabric = prepared.scenario, prepared.fabric
    run_ = scenario.engine.packet_run(fabric)
    try:
        work = check_graph_work(fabric, graph, run_, what="the jobs' iterations")
    except InputError as exc:
        path = ("engine", "max_packets") if exc.field == "max_packets" else ("engine",)
        raise located(InputError(".".join(path), exc.message), prepared.lines,
                      path) from None
    flow = simulate(graph, fabric.link_capacity)
    makespan = float(flow.finish.max(initial=0.0))
    nccl = next(iter(built.values()))[0].options.nccl
    out = run_graph_packet(fabric, graph, nccl, run_, horizon=2 * makespan, work=work)
    start, finish = out.run.start, out.run.finish
    iterations = {i: [account(it, start, finish) for it in its] for i, its in built.items()}
    ends = {i: float(max(finish[t] for t in its[-1].stage_end)) for i, its in built.items()}
    packet = packet_summary(fabric, out, watch_chosen=bool(run_.watch))
    packet["flow_makespan"] = makespan
    packet["makespan"] = out.run.makespan
    return iterations, ends, packet
