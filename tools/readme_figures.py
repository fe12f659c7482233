"""Write the demo's figures into README.md, so README quotes what `hpnsim demo` prints.

README's demo block (between the ``<!-- demo-takeaways -->`` markers) is the demo's takeaway
lines: the all-reduce per host generation (hpnsim.report.demo.allreduce_verdicts) and the
transport and incast part (hpnsim.report.transport.transport_lines). Those lines depend only
on the all-reduce and the packet parts, which run here at the full demo's sizes; the other
parts (iteration, scaling, failure, cluster) are made tiny, since no takeaway reads them.
tests/test_readme.py checks the block against the same computation.

Usage: python tools/readme_figures.py [--check]   (--check: exit 1 if README differs)
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
START, END = "<!-- demo-takeaways -->", "<!-- /demo-takeaways -->"


def demo_config():
    """The full demo's all-reduce and packet parts; every other part tiny."""
    from hpnsim.demo.pipeline import DemoConfig

    return DemoConfig(model="llama3-8b", tp=8, pp=1, dp=1, sizes=(2**20,), scaling_dps=(1,),
                      failure_iterations=2, failure_duration=0.2, failure_at=0.1,
                      cluster_scale=0.01, cluster_jobs=(1,), svg=False)


def takeaway_block(demo: dict) -> str:
    """The README block of a demo's result (``DemoResult.to_dict()``): one bullet a line."""
    from hpnsim.report.demo import allreduce_verdicts
    from hpnsim.report.transport import transport_lines

    lines = [line for _, line in allreduce_verdicts(demo).values()] + transport_lines(demo)
    return "\n".join(f"- {line}" for line in lines)


def readme_block(text: str) -> str:
    """The block README holds now."""
    match = re.search(re.escape(START) + r"\n(.*?)\n" + re.escape(END), text, flags=re.S)
    if match is None:
        raise SystemExit(f"README.md has no {START} ... {END} block")
    return match.group(1)


def main() -> int:
    from hpnsim.demo.pipeline import run_demo

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    block = takeaway_block(run_demo(demo_config()).to_dict())
    text = README.read_text(encoding="utf-8")
    if args.check:
        same = readme_block(text) == block
        print("README.md's demo figures are current" if same else
              "README.md's demo figures differ: run python tools/readme_figures.py")
        return 0 if same else 1
    README.write_text(text.replace(readme_block(text), block), encoding="utf-8")
    print(f"wrote the demo's figures into {README}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
