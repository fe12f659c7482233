#!/usr/bin/env python3
"""Record or compare the figures hpnsim prints, to show a refactor changed none of them.

Runs the demo (--quick), every README command with --json (reduced where README allows),
every example scenario and `hpnsim bench --quick --json`, keeps what each printed as JSON
with timings removed (wall/CPU seconds, peak memory, rates measured on this machine), and
either writes it to a folder or compares it with one written earlier.

    python tools/golden.py record golden/          # before the change
    python tools/golden.py compare golden/         # after: exit 1 on any difference

Figures are compared as canonical JSON text, so "identical" means byte-identical.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

COMMANDS: dict[str, list[str]] = {
    "demo_quick": ["demo", "--quick", "--json", "--out", "{tmp}/demo"],
    "run_two_jobs": ["run", "examples/two_jobs.yaml", "--json"],
    "run_one_job": ["run", "examples/one_job.yaml", "--json"],
    "run_collective": ["run", "examples/collective.yaml", "--json"],
    "run_failure": ["run", "examples/failure.yaml", "--json"],
    "cluster_example": ["cluster", "examples/cluster.yaml", "--json"],
    "cluster_compare": ["cluster", "examples/cluster.yaml", "--compare", "--json"],
    "cluster_lingjun": ["cluster", "--lingjun", "--jobs", "12", "--hours", "1", "--compare", "--json"],
    "fabric_hpn7": ["fabric", "hpn7", "--json"],
    "fabric_compare": ["fabric", "compare", "hpn7", "dcn_plus", "--gpus", "15360", "--json"],
    "collective_ecmp": ["collective", "--fabric", "hpn7", "--gpus", "2048", "--op", "allreduce",
                        "--algo", "ring", "--routing", "ecmp", "--sizes", "1M:4G", "--json"],
    "traffic": ["traffic", "--model", "llama3-70b", "--tp", "8", "--pp", "8", "--dp", "16",
                "--json"],
    "train_70b": ["train", "--model", "llama3-70b", "--tp", "8", "--pp", "8", "--dp", "16",
                  "--global-batch", "2048", "--fabric", "hpn7", "--json"],
    "scaling_8b": ["scaling", "--model", "llama3-8b", "--tp", "8", "--dp", "1,16,128",
                   "--gpu", "h100", "--json"],
    "train_fault": ["train", "--model", "llama3-8b", "--tp", "8", "--dp", "8", "--fabric", "hpn7",
                    "--iterations", "20", "--fault", "link:gpu17.port0@5s+5s", "--json"],
    "reliability": ["reliability", "--fabric", "hpn7", "--gpus", "3072", "--gpu-hour-price", "2",
                    "--compare", "--stacked-pair-loss", "0.5", "--json"],
    "bench_quick": ["bench", "--quick", "--json"],
}
FILES: dict[str, tuple[list[str], str]] = {
    "export_simai": (["fabric", "hpn7", "--segments", "1", "--hosts-per-segment", "2",
                      "--tor-uplinks", "2", "--aggs-per-plane", "2", "--export",
                      "{tmp}/topo.txt", "--format", "simai"], "topo.txt"),
}
# keys whose values are measurements of this machine, not figures of the model
TIMING_KEY = re.compile(r"^(seconds|cpu_s|cpu_seconds|peak_rss_mib?|meets_target|per_compile_ms"
                        r"|events_per_s_wall|events_per_s_cpu)$")


def strip_timings(value, bench: bool):
    if isinstance(value, dict):
        return {k: strip_timings(v, bench) for k, v in value.items()
                if not (bench and TIMING_KEY.search(k))}
    if isinstance(value, list):
        return [strip_timings(v, bench) for v in value]
    return value


def hpnsim(args: list[str], tmp: str) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("hpnsim")
    argv = [str(exe)] + [a.replace("{tmp}", tmp) for a in args]
    return subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})


def collect(names: list[str] | None) -> dict[str, str]:
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, args in COMMANDS.items():
            if names and name not in names:
                continue
            proc = hpnsim(args, tmp)
            if proc.returncode:
                out[name] = f"exit {proc.returncode}\n{proc.stderr[-2000:]}"
            else:
                data = strip_timings(json.loads(proc.stdout), name.startswith("bench"))
                out[name] = json.dumps(data, indent=1, sort_keys=True)
            print(f"{name}: {len(out[name])} chars", file=sys.stderr)
        for name, (args, file) in FILES.items():
            if names and name not in names:
                continue
            proc = hpnsim(args, tmp)
            out[name] = Path(tmp, file).read_text() if not proc.returncode else proc.stderr
    return out


def main() -> int:
    if len(sys.argv) < 3 or sys.argv[1] not in ("record", "compare"):
        print(__doc__)
        return 2
    mode, folder, names = sys.argv[1], Path(sys.argv[2]), sys.argv[3:] or None
    figures = collect(names)
    if mode == "record":
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in figures.items():
            (folder / f"{name}.txt").write_text(text)
        return 0
    differ = [n for n, t in figures.items() if (folder / f"{n}.txt").read_text() != t]
    for n in differ:
        print(f"DIFFERS: {n}")
    print(f"{len(figures) - len(differ)} of {len(figures)} identical")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
