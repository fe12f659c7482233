"""CLI command ``hpnsim demo``: the main job, HPN 7.0 against a 3-tier Clos (DCN+): bill of
materials, collectives, training and linearity, a link failure, a shared cluster."""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer

from hpnsim.cli.common import emit_json, guarded, table_console


def _save(result, out: Path, svg: bool) -> list[Path]:
    """demo.json, then the HTML report of it (index.html, each figure as PNG and, with
    ``svg``, SVG)."""
    from hpnsim.jsonable import to_jsonable
    from hpnsim.report.html import write_report
    from hpnsim.results import write_atomic

    out.mkdir(parents=True, exist_ok=True)
    data = write_atomic(out / "demo.json",
                        json.dumps(to_jsonable(result.to_dict()), indent=2) + "\n")
    return [data, write_report(out, svg=svg)]


class _Steps:
    """Live progress: a spinner on the step running, one line per finished step with its
    elapsed time (on stderr, so --json output stays clean)."""

    def __init__(self, console, status):
        self.console, self.status = console, status
        self.current, self.started, self.first = "", time.perf_counter(), time.perf_counter()

    def __call__(self, message: str) -> None:
        self.done()
        self.current, self.started = message, time.perf_counter()
        self.status.update(message + " ...")

    def done(self) -> None:
        if self.current:
            self.console.print(f"  [green]done[/green] {self.current}  "
                               f"[dim]{time.perf_counter() - self.started:.1f} s[/dim]",
                               highlight=False)
        self.current = ""


def register(app: typer.Typer) -> None:
    """Add ``demo`` to the root app."""

    @app.command()
    @guarded
    def demo(
        out: Path = typer.Option(Path("hpnsim-report"), "--out", help="Where the results "
                                 "and the report are written (demo.json, index.html, figures "
                                 "as PNG and SVG; --quick: PNG only)."),
        quick: bool = typer.Option(False, "--quick", help="Small sizes, PNG figures only: a "
                                   "run of seconds."),
        seed: int = typer.Option(0, "--seed", help="Seed for ECMP hashing and placement."),
        force: bool = typer.Option(False, "--force", help="Write into an --out folder that "
                                   "already holds files (a full demo's report, say), first "
                                   "removing what hpnsim wrote there (nothing else)."),
        json_out: bool = typer.Option(False, "--json", help="Print the results as JSON."),
    ) -> None:
        """The main job: HPN 7.0 vs a 3-tier Clos, the whole system in about a minute.

        Builds both 15,360-GPU fabrics and compares their bill of materials; simulates a
        4 GiB all-reduce over 2,048 GPUs with the algorithm NCCL picks on the fabrics' H800
        hosts (a forced ring beside it shows HPN's PXN relay) under ECMP, HPN dual-plane,
        precise and ideal spray routing, on H800 and on H100-class hosts (900 GB/s NVLink),
        and its bus bandwidth from 1 MiB to 4 GiB; one Llama-3 70B TP 8 x PP 8 x DP 16
        iteration on each fabric and its linearity as DP grows; a small job through one
        access-link failure with a single ToR and with HPN's dual ToR; a small shared
        cluster with no scheduler and with Crux; and, as packets with the default RoCE
        parameters, one rail's traffic on both fabrics and an 8:1 incast with and without
        DCQCN (queues, ECN marks, CNPs, rate cuts, PFC pauses, head-of-line blocking;
        --quick skips it). Writes demo.json and the HTML report (index.html) to --out.
        """
        from rich.console import Console

        from hpnsim.cli.common import OutputFolder
        from hpnsim.demo.pipeline import DemoConfig, run_demo
        from hpnsim.errors import check_seed
        from hpnsim.report.demo import print_demo, print_demo_extras, print_takeaways

        check_seed(seed, "--seed")
        folder = OutputFolder(out, "--out", force)   # before the run, not after it
        config = DemoConfig.quick() if quick else DemoConfig()
        config = DemoConfig(**{**config.__dict__, "seed": seed})
        err = Console(stderr=True)
        start = time.perf_counter()
        with err.status("starting") as status:
            steps = _Steps(err, status)
            result = run_demo(config, step=steps)
            # which demo this is, for the page and demo.json (a --quick report is small sizes)
            result.config["variant"] = "quick" if quick else "full"
            steps("writing demo.json and the HTML report")
            with folder as path:
                written = _save(result, path, svg=config.svg)
            steps.done()
        err.print(f"[bold]demo finished in {time.perf_counter() - start:.1f} s[/bold]")
        if json_out:
            emit_json(result)
            return
        console = table_console()
        print_demo(result, console)
        print_demo_extras(result, console)
        print_takeaways(result, console)
        console.print("written: " + ", ".join(str(p) for p in written))
