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
from hpnsim.sched.names import SCHEDULERS
from hpnsim.workloads.allocator_names import ALLOCATORS

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


#: what each column of the table divides by (``--help`` and the table's caption)
COLUMNS_HELP = (
    "Columns: 'util. per cluster GPU' = computation the GPUs finish in the window / "
    "(cluster GPUs x window length) (Crux's Definition 1); 'util. per GPU held' = that "
    "computation / GPU-seconds jobs held inside the window; computation = sum over jobs of "
    "GPUs x compute seconds per iteration x iterations done in the window (the one in "
    "progress pro rata); 'mean JCT' = mean of finish - arrival over jobs started; 'mean "
    "slowdown' = mean of a job's iteration time over its alone iteration time; 'jobs "
    "contended' / 'GPUs contended' = share of jobs (of their GPUs) slowed by more than the "
    "tolerance; 'makespan' = end of the run; 'extrapolated' = share of the run no "
    "steady-state probe simulated. Jobs table (one scheduler): 'wait' = start - arrival; "
    "'JCT' = finish - arrival; 'iteration' = mean seconds per iteration while it ran; "
    "'alone' = its iteration alone on the same GPUs with plain ECMP; 'slowdown' = iteration "
    "/ alone; 'rate in T' = iterations per second while it held GPUs in the window.")


def _window(text: str | None) -> list[float] | None:
    """``--window START,END`` (times with units) as seconds."""
    from hpnsim.errors import InputError
    from hpnsim.units import parse_time

    if text is None:
        return None
    parts = text.split(",")
    if len(parts) != 2:
        raise InputError("--window", f"two times START,END (e.g. 2h,6h), got {text!r}")
    a, b = (parse_time(p.strip(), "--window") for p in parts)
    if not a < b:
        raise InputError("--window", f"needs START < END, got {text!r}")
    return [a, b]


def _expected_end(scenario) -> float:
    """A lower bound of the trace's end for the bar: arrival + duration, or arrival +
    compute-only iterations."""
    from hpnsim.workloads.jobmix import iteration_time_estimate

    end = 0.0
    for job in scenario.jobs:
        if job.duration is not None:
            end = max(end, job.arrival + job.duration)
            continue
        est = iteration_time_estimate({k: getattr(job, k) for k in
                                       ("model", "tp", "pp", "dp", "micro_batch",
                                        "global_batch", "gpu")})
        end = max(end, job.arrival + job.iterations * est)
    return end


def _help() -> str:
    """The command's help: what it does, an example, and every column of its tables."""
    return ("Run jobs as a shared-cluster trace: they arrive, queue for hosts, train together "
            "and leave, while a scheduler (Crux or a rival) orders and places their traffic. "
            "Prints GPU utilization, job completion times and slowdowns.\n\n"
            "Example: hpnsim cluster examples/cluster.yaml --compare; "
            "hpnsim cluster --lingjun --jobs 60 --hours 4 --window 2h,4h --compare\n\n"
            + COLUMNS_HELP)


def register(app: typer.Typer) -> None:
    """Add ``cluster`` to the root app."""

    @app.command(help=_help())
    @guarded
    def cluster(
        scenario: str = typer.Argument(None, help="Scenario YAML with jobs (and a cluster: "
                                                  "section); not with --lingjun."),
        scheduler: str = typer.Option(None, "--scheduler", help=f"{', '.join(SCHEDULERS)} "
                                      "(default: the scenario's, else none)."),
        allocator: str = typer.Option(None, "--allocator", help=f"{', '.join(ALLOCATORS)} "
                                      "(default: the scenario's, else packed)."),
        share_hosts: bool = typer.Option(None, "--share-hosts/--whole-hosts", help="Jobs "
                                         "smaller than a host take free GPUs of a partly "
                                         "used host (default: the scenario's, else whole "
                                         "hosts)."),
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
        horizon: str = typer.Option(None, "--horizon", help="Stop the trace at this time "
                                    "(e.g. 8h; default: the scenario's, else the window's "
                                    "end, else when every job has left)."),
        window: str = typer.Option(None, "--window", help="START,END (e.g. 2h,6h): measure "
                                   "utilization over this period of the trace, the same for "
                                   "every scheduler (default: the scenario's, else the whole "
                                   "run)."),
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
        from hpnsim.units import parse_time
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
        if share_hosts is not None:
            spec.cluster.share_hosts = share_hosts
        if horizon is not None:
            spec.cluster.horizon = parse_time(horizon, "--horizon", allow_zero=False)
        if window is not None:
            spec.cluster.window = _window(window)
        _check_window(spec, "--window" if window is not None else "cluster.window", lines,
                      "--horizon" if horizon is not None else "cluster.horizon")
        # one iteration per job: steady state probes a few, and exact mode sizes each job's
        # graph by its duration or the horizon, never by its iteration count
        check_task_floor(spec, every_iteration=False)
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
            typer.echo(f"# {spec.gpu_line()}")


def _check_window(spec, name: str, lines: dict, horizon_name: str = "cluster.horizon") -> None:
    """The horizon and the window against the trace, named as the user gave them (with the
    YAML line when they came from the scenario)."""
    from hpnsim.errors import InputError
    from hpnsim.scenario.yaml import located
    from hpnsim.sched.cluster.driver import check_horizon, check_window

    for check, named, key in ((lambda: check_horizon(spec.cluster.horizon, spec.jobs),
                               horizon_name, "horizon"),
                              (lambda: check_window(spec.cluster.window, spec.cluster.horizon,
                                                    spec.jobs), name, "window")):
        try:
            check()
        except InputError as exc:
            if named.startswith("--"):
                raise InputError(named, exc.message) from None
            raise located(InputError("", exc.message), lines, ("cluster", key)) from None


def _run_all(spec, fabric, names, allocator, exact):
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from hpnsim.scenario.cluster import run_cluster
    from hpnsim.sched.cluster.jobs import TemplateCache

    # every scheduler replays the same compiled iterations: each (job, GPUs, routing seed)
    # is compiled and run alone once for the whole comparison
    templates = TemplateCache(fabric, spec.routing)
    end = spec.cluster.horizon or (spec.cluster.window[1] if spec.cluster.window else None)
    total = end or max(_expected_end(spec), 1e-9)
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
                                       exact=exact, progress=update, templates=templates))
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
