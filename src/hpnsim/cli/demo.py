"""CLI command ``hpnsim demo``: the main job, HPN 7.0 against a 3-tier Clos in three questions."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from hpnsim.cli.common import emit_json, guarded, table_console


def _print(result, console) -> None:
    from rich.table import Table

    from hpnsim.cli.fabric import _rows
    from hpnsim.units import format_time

    cfg = result.config
    table = Table(title=f"1. A {cfg['pod_gpus']:,}-GPU fabric: HPN 7.0 vs DCN+ (3-tier Clos)")
    table.add_column("")
    for report in result.fabrics:
        table.add_column(report["template"], justify="right")
    columns = [dict(_rows(r)) for r in result.fabrics]
    for key in columns[0]:
        table.add_row(key, *(c.get(key, "-") for c in columns))
    console.print(table)

    size = cfg["allreduce_size"] / 2**30
    table = Table(title=f"2. {size:g} GiB {cfg['allreduce_algo']} all-reduce over "
                        f"{cfg['allreduce_gpus']:,} GPUs")
    for column in ("fabric", "routing", "time", "busbw GB/s", "hash collisions",
                   "max flows on a link", "bottleneck (busy)"):
        table.add_column(column, justify="left" if column in ("fabric", "routing") else "right")
    for r in result.allreduce:
        table.add_row(r["fabric"], r["routing"], format_time(r["time"]), f"{r['busbw']:.1f}",
                      f"{r['hash_collisions']}", f"{r['max_link_flows']:.2g}",
                      f"{r['bottleneck_kind']} {100 * r['bottleneck_utilization']:.0f}%")
    console.print(table)
    for r in result.allreduce:
        console.print(f"  bottleneck {r['fabric']}/{r['routing']}: {r['bottleneck']}",
                      highlight=False)

    table = Table(title=f"3. One {cfg['model']} iteration, TP {cfg['tp']} x PP {cfg['pp']} x "
                        f"DP {cfg['dp']} ({cfg['tp'] * cfg['pp'] * cfg['dp']:,} GPUs)")
    table.add_column("part")
    for r in result.training:
        table.add_column(r["fabric"], justify="right")
    parts = [("iteration", lambda r: r["iteration_time"]),
             ("compute", lambda r: r["compute_time"])]
    parts += [(f"exposed {k}", lambda r, k=k: r["exposed_comm"][k])
              for k in result.training[0]["exposed_comm"]
              if any(r["exposed_comm"][k] for r in result.training)]
    parts += [("pipeline bubble", lambda r: r["bubble"]),
              ("optimizer", lambda r: r["optimizer_time"])]
    for name, get in parts:
        table.add_row(name, *(format_time(get(r)) for r in result.training))
    table.add_row("MFU", *(f"{100 * r['mfu']:.1f}%" for r in result.training))
    table.add_row("tokens/s", *(f"{r['tokens_per_second']:,.0f}" for r in result.training))
    console.print(table)


def _save(result, out: Path) -> list[Path]:
    from hpnsim.cli.common import to_jsonable
    from hpnsim.report.figures import plot_busbw, plot_iteration_breakdown

    out.mkdir(parents=True, exist_ok=True)
    data = out / "demo.json"
    data.write_text(json.dumps(to_jsonable(result.to_dict()), indent=2) + "\n")
    cfg = result.config
    return [
        data,
        plot_busbw(result.allreduce, out / "allreduce_busbw.png",
                   f"{cfg['allreduce_size'] / 2**30:g} GiB all-reduce, "
                   f"{cfg['allreduce_gpus']:,} GPUs"),
        plot_iteration_breakdown(result.training, out / "iteration_breakdown.png",
                                 f"{cfg['model']} TP{cfg['tp']} PP{cfg['pp']} DP{cfg['dp']}"),
    ]


def register(app: typer.Typer) -> None:
    """Add ``demo`` to the root app."""

    @app.command()
    @guarded
    def demo(
        out: Path = typer.Option(Path("hpnsim-out/demo"), "--out", help="Where results and "
                                 "figures are written (demo.json, *.png)."),
        quick: bool = typer.Option(False, "--quick", help="Small sizes: a run of seconds."),
        seed: int = typer.Option(0, "--seed", help="Seed for ECMP hashing and placement."),
        json_out: bool = typer.Option(False, "--json", help="Print the results as JSON."),
    ) -> None:
        """The main job: HPN 7.0 vs a 3-tier Clos (pod BOM, all-reduce, Llama-3 70B iteration).

        Builds both 15,360-GPU fabrics and compares their bill of materials, simulates a
        4 GiB ring all-reduce over 2,048 GPUs under ECMP, HPN dual-plane, precise and ideal
        spray routing, and one Llama-3 70B TP 8 x PP 8 x DP 16 iteration on each fabric.
        Results and figures go to --out.
        """
        from rich.console import Console

        from hpnsim.demo import DemoConfig, run_demo

        config = DemoConfig.quick() if quick else DemoConfig()
        config = DemoConfig(**{**config.__dict__, "seed": seed})
        err = Console(stderr=True)
        with err.status("starting") as status:
            result = run_demo(config, step=lambda message: status.update(message + " ..."))
        written = _save(result, out)
        if json_out:
            emit_json(result)
            return
        console = table_console()
        _print(result, console)
        console.print("written: " + ", ".join(str(p) for p in written))
