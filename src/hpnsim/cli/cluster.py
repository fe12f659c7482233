"""CLI command: ``hpnsim cluster`` (a shared-cluster trace under one or every scheduler)."""

from __future__ import annotations

import typer

from hpnsim.cli.common import (
    OutputFolder,
    TableFiles,
    check_figure_file,
    check_output_file,
    emit_json,
    force_option,
    guarded,
    parquet_option,
    table_console,
)

#: the Lingjun mix's arrival horizon when --hours is not given (the published trace: a day)
DEFAULT_HOURS = 24.0


def _lingjun_trace(jobs: int, seed: int, hours: float, allocator: str):
    """The seeded synthetic Lingjun mix on the Lingjun topology, as a parsed Scenario."""
    from hpnsim.fabrics.lingjun import DEFAULT_PATH
    from hpnsim.scenario.spec import parse_scenario
    from hpnsim.workloads.jobmix import lingjun_mix

    mix = lingjun_mix(jobs, seed=seed, hours=hours)
    return parse_scenario({"fabric": {"template": "lingjun", "topology": DEFAULT_PATH},
                           "jobs": mix, "seed": seed, "cluster": {"allocator": allocator}})


def _expected_end(scenario) -> float:
    """A lower bound of the trace's end (arrival + compute-only iterations) for the bar."""
    from hpnsim.workloads.jobmix import iteration_time_estimate

    end = 0.0
    for job in scenario.jobs:
        est = iteration_time_estimate({k: getattr(job, k) for k in
                                       ("model", "tp", "pp", "dp", "micro_batch",
                                        "global_batch", "gpu")})
        end = max(end, job.arrival + job.iterations * est)
    return end


def register(app: typer.Typer) -> None:
    """Add ``cluster`` to the root app."""

    @app.command()
    @guarded
    def cluster(
        scenario: str = typer.Argument(None, help="Scenario YAML with jobs (and a cluster: "
                                                  "section); not with --lingjun."),
        scheduler: str = typer.Option(None, "--scheduler", help="none, crux-pa, crux-ps-pa, "
                                      "crux, sincronia, taccl, cassini or varys (default: the "
                                      "scenario's, else none)."),
        allocator: str = typer.Option(None, "--allocator", help="packed, topology_aware, "
                                      "random or given (default: the scenario's, else packed)."),
        exact: bool = typer.Option(None, "--exact/--steady", help="Simulate every iteration "
                                   "(default: steady-state extrapolation between events)."),
        compare: bool = typer.Option(False, "--compare", help="Run every scheduler on the "
                                     "same jobs, allocator and seed; print them side by side."),
        lingjun: bool = typer.Option(False, "--lingjun", help="A seeded synthetic Lingjun job "
                                     "mix on the Lingjun topology instead of a scenario."),
        jobs: int = typer.Option(300, "--jobs", help="--lingjun: jobs in the mix."),
        seed: int = typer.Option(0, "--seed", help="--lingjun: seed of the mix, the routing "
                                 "hashes and the allocator."),
        hours: float = typer.Option(DEFAULT_HOURS, "--hours", help="--lingjun: the arrivals' "
                                    "horizon in hours."),
        out: str = typer.Option(None, "--out", help="Write cluster_<scheduler>.json, "
                                "jobs_<scheduler>.csv and utilization.png into this folder."),
        plot: str = typer.Option(None, "--plot", help="Write the utilization-over-time figure."),
        force: bool = force_option(),
        trace: str = typer.Option(None, "--trace", help="Write the jobs' queueing, running "
                                  "and progress as Chrome-trace JSON (one process per "
                                  "scheduler, one thread per job; https://ui.perfetto.dev)."),
        json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
        csv: str = typer.Option(None, "--csv", help="Also write the table's rows to this CSV "
                                "file (one per job; with --compare one per scheduler)."),
        parquet: str = parquet_option(),
    ) -> None:
        """Run jobs as a shared-cluster trace: they arrive, queue for hosts, train together
        and leave, while a scheduler (Crux or a rival) orders and places their traffic.
        Prints GPU utilization, job completion times and slowdowns.

        Example: hpnsim cluster examples/cluster.yaml --compare;
        hpnsim cluster --lingjun --jobs 60 --hours 4 --compare
        """
        from hpnsim.errors import InputError, check_work
        from hpnsim.scenario.cluster import ClusterSpec
        from hpnsim.scenario.prepare import build_scenario_fabric, scenario_and_lines
        from hpnsim.scenario.runner import check_task_floor
        from hpnsim.scenario.spec import check_against_fabric
        from hpnsim.sched.names import SCHEDULERS
        from hpnsim.workloads.allocator_names import ALLOCATORS

        if lingjun == (scenario is not None):
            raise InputError("scenario", "give a scenario file or --lingjun, exactly one")
        if scheduler is not None and scheduler not in SCHEDULERS:
            raise InputError("--scheduler", f"choose one of {', '.join(SCHEDULERS)}, got "
                                            f"{scheduler!r}")
        if compare and scheduler is not None:
            raise InputError("--compare", "runs every scheduler; leave out --scheduler")
        if allocator is not None and allocator not in ALLOCATORS:
            raise InputError("--allocator", f"choose one of {', '.join(ALLOCATORS)}, got "
                                            f"{allocator!r}")
        folder = OutputFolder(out, "--out", force) if out is not None else None
        if plot is not None:
            check_figure_file(plot)
        if trace is not None:
            check_output_file(trace, "--trace")
        tables = TableFiles(csv, parquet)
        if lingjun:
            if jobs < 1:
                raise InputError("--jobs", f"must be >= 1, got {jobs}")
            check_work(jobs, "jobs", "--jobs", f"a mix of {jobs:,} jobs")
            if not hours > 0:
                raise InputError("--hours", f"must be > 0, got {hours}")
            spec, lines = _lingjun_trace(jobs, seed, hours, allocator or "packed"), {}
        else:
            spec, lines = scenario_and_lines(scenario)
            if spec.cluster is None:
                spec.cluster = ClusterSpec()
            check_work(len(spec.jobs), "jobs", "jobs", f"the trace has {len(spec.jobs):,} jobs")
        check_task_floor(spec, every_iteration=bool(exact if exact is not None
                                                    else spec.cluster.exact))
        fabric = build_scenario_fabric(spec, lines)
        check_against_fabric(spec, fabric, lines)
        names = SCHEDULERS if compare else [scheduler or spec.cluster.scheduler]
        if (allocator or spec.cluster.allocator) == "given":
            for i, job in enumerate(spec.jobs):
                if job.gpus is None and job.hosts is None:
                    raise InputError(f"jobs[{i}].gpus", "the given allocator needs every "
                                                        "job's gpus or hosts")
        results = _run_all(spec, fabric, names, allocator, exact)
        _save(results, folder, plot)
        tables.write([r.summary() for r in results] if compare else results[0].rows())
        if trace is not None:
            from hpnsim.report.trace import cluster_trace, write_trace

            typer.echo(f"wrote {write_trace(cluster_trace(results), trace)}", err=True)
        if json_out:
            if compare:
                emit_json({"jobs": len(spec.jobs), "gpus": fabric.n_gpus,
                           "schedulers": [r.to_dict() for r in results]})
            else:
                emit_json(results[0].to_dict())
        else:
            from hpnsim.report.cluster import print_cluster, print_compare

            console = table_console()
            if compare:
                print_compare(results, console)
            else:
                print_cluster(results[0], console)


def _run_all(spec, fabric, names, allocator, exact):
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from hpnsim.scenario.cluster import run_cluster

    total = spec.cluster.horizon or max(_expected_end(spec), 1e-9)
    results = []
    columns = ("[progress.description]{task.description}", BarColumn(),
               TextColumn("{task.fields[status]}"), TimeElapsedColumn())
    with Progress(*columns, console=table_console(stderr=True), transient=True) as bar:
        for name in names:
            task = bar.add_task(f"{name:>10}", total=total, status="")

            def update(t, finished, n, task=task):
                bar.update(task, total=max(total, t), completed=t,
                           status=f"{t / 3600:,.2f} h simulated, {finished}/{n} jobs done")

            results.append(run_cluster(spec, fabric, scheduler=name, allocator=allocator,
                                       exact=exact, progress=update))
    return results


def _save(results, out: OutputFolder | None, plot) -> None:
    from hpnsim.report.cluster import plot_utilization

    if out is not None:
        with out as folder:
            _save_files(results, folder)
    if plot is not None:
        typer.echo(f"wrote {plot_utilization(results, plot)}", err=True)


def _save_files(results, folder) -> None:
    """cluster_<scheduler>.json, jobs_<scheduler>.csv and utilization.png into ``folder``."""
    import json

    from hpnsim.jsonable import to_jsonable
    from hpnsim.report.cluster import plot_utilization
    from hpnsim.results import write_atomic

    for r in results:
        path = folder / f"cluster_{r.scheduler}.json"
        write_atomic(path, json.dumps(to_jsonable(r.to_dict()), indent=2))
        rows = r.rows()
        csv = folder / f"jobs_{r.scheduler}.csv"
        keys = list(rows[0]) if rows else []
        write_atomic(csv, "\n".join([",".join(keys)] + [",".join(str(row[k]) for k in keys)
                                                      for row in rows]) + "\n")
        typer.echo(f"wrote {path}, {csv}", err=True)
    typer.echo(f"wrote {plot_utilization(results, folder / 'utilization.png')}", err=True)
