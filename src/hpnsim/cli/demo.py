"""CLI command ``hpnsim demo``: the main job, HPN 7.0 against a 3-tier Clos in three questions."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from hpnsim.cli.common import emit_json, guarded, table_console


def _save(result, out: Path) -> list[Path]:
    from hpnsim.jsonable import to_jsonable
    from hpnsim.report.figures import demo_figures

    out.mkdir(parents=True, exist_ok=True)
    data = out / "demo.json"
    data.write_text(json.dumps(to_jsonable(result.to_dict()), indent=2) + "\n")
    return [data, *demo_figures(result, out)]


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

        from hpnsim.cli.common import check_output_dir
        from hpnsim.demo import DemoConfig, run_demo
        from hpnsim.errors import check_seed
        from hpnsim.report.tables import print_demo

        check_seed(seed, "--seed")
        check_output_dir(out, "--out")   # before the run, not after it
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
        print_demo(result, console)
        console.print("written: " + ", ".join(str(p) for p in written))
