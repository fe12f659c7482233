"""``hpnsim report DIR``: the HTML report of a run (sections, escaping, embedded figures,
numbers as the result files hold them), bad folders, and the page in real headless Chromium."""

from __future__ import annotations

import csv
import json
import re
import shutil
import struct
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from hpnsim.cli.main import run as cli
from hpnsim.report.html import write_report
from hpnsim.scenario.runner import run

EVIL = "<script>alert(1)</script>"
#: a tiny run: 4 hosts of HPN 7.0 (32 GPUs), two jobs (one with 128 micro-batches, so its
#: Gantt chart needs the overview and zooms), one all-reduce sweep, the fabric report
SCENARIO = {
    "name": "report-test",
    "fabric": {"template": "hpn7", "segments": 2, "hosts_per_segment": 2, "backup_hosts": 0},
    "routing": "ecmp", "seed": 0, "report_fabric": True,
    "jobs": [{"name": EVIL, "model": "llama3-8b", "tp": 8, "pp": 2, "dp": 1,
              "global_batch": 128, "hosts": [0, 2]},
             {"name": "job-b", "model": "llama3-8b", "tp": 8, "dp": 2, "global_batch": 8,
              "hosts": [1, 3]}],
    "collectives": [{"name": "ar", "op": "allreduce", "sizes": "1M:16M", "algo": "ring"}],
}
STEMS = ("iteration_breakdown", "timeline_job0", "timeline_job1", "collective_busbw")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("run")
    run(SCENARIO).save(folder)
    page = write_report(folder)
    return folder, page, page.read_text(encoding="utf-8")


class _Cells(HTMLParser):
    """Rows of every <table> (cell text) and every <img> src of a page."""

    def __init__(self):
        super().__init__()
        self.tables, self.images, self._cell = [], [], None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = ""
        elif tag == "img":
            self.images.append(dict(attrs).get("src", ""))

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.tables[-1][-1].append(self._cell)
            self._cell = None


def _parse(page: str) -> _Cells:
    cells = _Cells()
    cells.feed(page)
    return cells


def _table(cells: _Cells, first_header: str) -> list[dict]:
    table = next(t for t in cells.tables if t[0][0] == first_header)
    return [dict(zip(table[0], row, strict=True)) for row in table[1:]]


def test_sections_figures_and_files(report):
    folder, page, text = report
    assert page == folder / "index.html"
    headings = re.findall(r"<h2>(.*?)</h2>", text)
    assert headings == ["Fabric overview", "Iteration results per job", "Iteration timeline",
                        "Collectives"]
    cells = _parse(text)
    assert len(cells.images) == len(STEMS)
    for stem in STEMS:
        png, svg = folder / f"{stem}.png", folder / f"{stem}.svg"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert svg.read_text().lstrip().startswith("<?xml")
    # every image is embedded: no src or href points anywhere but into the page
    assert all(src.startswith("data:image/png;base64,") for src in cells.images)
    assert re.findall(r'(?:src|href)="(?!data:|#)', text) == []
    # 128 micro-batches: an overview and two zooms (three axes) instead of 512 thin bars
    assert (folder / "timeline_job0.svg").read_text().count('<g id="axes_') == 3
    assert (folder / "timeline_job1.svg").read_text().count('<g id="axes_') == 1


def test_user_strings_are_escaped(report):
    _, _, text = report
    assert EVIL not in text and "<script" not in text
    assert text.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 2   # table and caption
    assert EVIL in [row["job"] for row in _table(_parse(text), "job")]


def test_tables_show_the_result_files(report):
    """The job table repeats jobs.csv; the collective table repeats collectives.csv, and its
    columns obey nccl-tests' definition busbw = algbw * 2 (n - 1) / n for all-reduce."""
    folder, _, text = report
    cells = _parse(text)
    jobs = _table(cells, "job")
    with open(folder / "jobs.csv") as f:
        expected = list(csv.DictReader(f))
    assert [j["job"] for j in jobs] == [e["job"] for e in expected]
    for shown, row in zip(jobs, expected, strict=True):
        assert shown["MFU"] == f"{100 * float(row['mfu']):.1f}%"
        assert shown["GPUs"] == "16"
    assert jobs[0]["parallelism"] == "TP8 x PP2 x DP1"
    sizes = _table(cells, "collective")
    with open(folder / "collectives.csv") as f:
        expected = list(csv.DictReader(f))
    assert [int(s["size (B)"].replace(",", "")) for s in sizes] == [2**20 * 2**k for k in range(5)]
    for shown, row in zip(sizes, expected, strict=True):
        assert shown["busbw (GB/s)"] == f"{float(row['busbw']):.2f}"
        algbw, busbw, n = float(shown["algbw (GB/s)"]), float(shown["busbw (GB/s)"]), 32
        assert busbw == pytest.approx(algbw * 2 * (n - 1) / n, abs=0.02)   # both shown to 0.01
    # the fabric table: 4 hosts of 8 GPUs
    fabric = {row[""]: row["hpn7"] for row in _table(cells, "")}
    assert (fabric["GPUs"], fabric["hosts (active)"]) == ("32", "4")


def test_figures_start_at_zero_and_legends_sit_outside_the_axes():
    from hpnsim.report.collective import busbw_size_figure
    from hpnsim.report.iteration import breakdown_figure

    rows = [{"label": "a", "iterations": 1, "parts": {"compute": 1.0, "tp": 0.5, "dp": 0.2}}]
    curves = [{"label": "x", "sizes": [2**20, 2**24], "busbw": [30.0, 150.0], "bound": "b"}]
    bars, lines = breakdown_figure(rows, "t", "held"), busbw_size_figure(curves, "t", "held")
    assert bars.axes[0].get_xlim()[0] == 0.0 and lines.axes[0].get_ylim()[0] == 0.0
    for fig in (bars, lines):
        fig.canvas.draw()
        ax, legend = fig.axes[0], fig.legends[0]
        box, axes = legend.get_window_extent(), ax.get_window_extent()
        assert box.y1 <= axes.y0   # the legend is wholly below the axes
    # the bars' widths are the parts, stacked from 0 to their sum
    fig = breakdown_figure(rows, "t", "held")
    spans = [v for p in fig.axes[0].patches for v in (p.get_x(), p.get_width())]
    assert spans == pytest.approx([0.0, 1.0, 1.0, 0.5, 1.5, 0.2])


@pytest.mark.parametrize(("make", "says"), [
    (lambda d: d / "missing", "is not a folder"),
    (lambda d: d, "holds neither results.json"),
    (lambda d: (d / "results.json").write_text('{"rows": []}') and d, "not an hpnsim result"),
    (lambda d: (d / "results.json").write_text("not json") and d, "is not JSON"),
])
def test_bad_folders_exit_2_with_one_line(tmp_path, capsys, make, says):
    folder = make(tmp_path)
    with pytest.raises(SystemExit) as done:
        cli(["report", str(folder)])
    err = capsys.readouterr().err.strip().splitlines()
    assert done.value.code == 2 and len(err) == 1
    assert err[0].startswith("error: DIR: ") and says in err[0]
    assert not (tmp_path / "index.html").exists()


def test_demo_results_render(tmp_path):
    from hpnsim.demo.pipeline import DemoConfig, run_demo
    from hpnsim.jsonable import to_jsonable

    result = run_demo(DemoConfig(pod_gpus=1024, allreduce_gpus=64, allreduce_size=2**20,
                                 model="llama3-8b", tp=8, pp=1, dp=2, sizes=(2**20,),
                                 scaling_dps=(1, 2), failure_iterations=4,
                                 failure_duration=0.5, failure_at=0.2, cluster_scale=0.02))
    (tmp_path / "demo.json").write_text(json.dumps(to_jsonable(result.to_dict())))
    out = tmp_path / "site" / "report.html"
    with pytest.raises(SystemExit) as done:
        cli(["report", str(tmp_path), "--out", str(out)])
    assert done.value.code == 0
    text = out.read_text()
    assert re.findall(r"<h2>(.*?)</h2>", text)[:2] == ["Fabric overview",
                                                       "All-reduce by fabric and routing"]
    cells = _parse(text)
    # BOM has no figure; all-reduce, iteration, busbw by size, linearity, failure, cluster
    # do, and the packet part: a queue figure per fabric, one per incast case
    assert len(cells.images) == 6 + 2 + 3 and (out.parent / "allreduce_busbw.svg").exists()
    assert "Transport and incast: queues, marks, rate cuts, pauses" in text
    fabric = _table(cells, "")
    assert [c for c in fabric[0] if c] == ["hpn7", "dcn_plus"]
    routings = [row["routing"] for row in _table(cells, "fabric")
                if "routing" in row]
    assert sorted(set(routings)) == ["ecmp", "hpn_dual_plane", "precise", "spray"]


# --------------------------------------------------------------------- real Chromium
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
          "--disable-background-networking", "--disable-component-update", "--disable-sync",
          "--hide-scrollbars", "--enable-logging=stderr", "--v=0"]
#: the test's own probe: once the page has loaded, the title counts the images that decoded.
#: The page's CSP forbids scripts; the copy under test allows exactly this one by nonce, so
#: a script smuggled in by a user string would still be refused (and logged).
_PROBE = ('<script nonce="probe">window.addEventListener("load", () => {'
          'const all = [...document.images]; document.title = "images " + all.filter('
          'i => i.complete && i.naturalWidth > 0).length + "/" + all.length; });</script>')


def _chromium(tmp_path: Path, page: Path, *extra: str) -> tuple[str, list[str]]:
    """Run headless Chromium on ``page``; (stdout, console messages it logged)."""
    profile = tmp_path / f"profile-{len(list(tmp_path.iterdir()))}"
    done = subprocess.run([CHROMIUM, *_FLAGS, f"--user-data-dir={profile}", *extra,
                           page.resolve().as_uri()], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, [line for line in done.stderr.splitlines() if ":CONSOLE" in line]


def _probed(page: Path, target: Path) -> Path:
    text = page.read_text(encoding="utf-8")
    text = text.replace("style-src 'unsafe-inline'", "style-src 'unsafe-inline'; "
                        "script-src 'nonce-probe'", 1).replace("</head>", _PROBE + "</head>", 1)
    target.write_text(text, encoding="utf-8")
    return target


def _title(dom: str) -> str:
    return re.search(r"<title>(.*?)</title>", dom).group(1)


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install "
                                             "chromium)")
def test_the_page_in_headless_chromium(report, tmp_path):
    folder, page, text = report
    # the probe can fail: a broken image, a blocked external image and a thrown error
    bad = tmp_path / "bad.html"
    bad.write_text(re.sub(r'src="data:[^"]*"', 'src="data:image/png;base64,AAAA"', text, count=1)
                   .replace("</body>", '<img src="https://example.com/x.png">'
                            '<script nonce="probe">throw new Error("boom")</script></body>'))
    dom, console = _chromium(tmp_path, _probed(bad, tmp_path / "bad-probed.html"),
                             "--dump-dom", "--virtual-time-budget=10000")
    assert _title(dom) == f"images {len(STEMS) - 1}/{len(STEMS) + 1}"
    assert any("Uncaught Error: boom" in line for line in console)
    assert any("example.com" in line for line in console)
    # the report itself: every image decodes, nothing is logged, the escaped name is text
    dom, console = _chromium(tmp_path, _probed(page, folder / "probed.html"), "--dump-dom",
                             "--virtual-time-budget=10000")
    assert _title(dom) == f"images {len(STEMS)}/{len(STEMS)}"
    assert console == []
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom
    # and a screenshot of the unmodified page, as a reader sees it
    shot = folder / "screenshot.png"
    _, console = _chromium(tmp_path, page, f"--screenshot={shot}", "--window-size=1280,2000")
    assert console == []
    width, height = struct.unpack(">II", shot.read_bytes()[16:24])
    assert (width, height) == (1280, 2000)


def test_compute_by_class_table_repeats_the_iterations(report):
    """Per job: GEMM, attention and memory-bound compute (mean over the simulated
    iterations), their sum as compute (the job's compute time), the optimizer and the dtype."""
    from hpnsim.units import format_time

    folder, _, text = report
    table = next(t for t in _parse(text).tables if t[0][:2] == ["job", "GEMM compute"])
    rows = [dict(zip(table[0], row, strict=True)) for row in table[1:]]
    results = json.loads((folder / "results.json").read_text())
    assert [r["job"] for r in rows] == [j["job"] for j in results["jobs"]]
    for row, job in zip(rows, results["jobs"], strict=True):
        its = job["per_iteration"]
        compute = sum(it["compute_time"] for it in its) / len(its)
        assert row["compute"] == format_time(compute)
        gemm = sum(it["compute_by_class"]["gemm"] for it in its) / len(its)
        assert row["GEMM compute"] == f"{format_time(gemm)} ({100 * gemm / compute:.0f}%)"
        assert row["dtype"] == "bf16"
