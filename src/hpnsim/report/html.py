"""``hpnsim report DIR``: one self-contained HTML page of a run's or the demo's results.

The page embeds every figure as a base64 PNG, loads nothing from anywhere (its Content
Security Policy allows only inline styles and ``data:`` images, and no script), and escapes
every string that came from the user (job, collective and fabric names) with
:func:`html.escape`. Each figure is also saved as PNG and SVG beside the page.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path

from hpnsim.report.demo import demo_sections
from hpnsim.report.inputs import load_results
from hpnsim.report.scenario import run_sections
from hpnsim.report.section import Figure, Table
from hpnsim.report.style import save_figure

#: nothing external, no script: the page is a document, and stays one when mailed around
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1180px;
       color: #222; line-height: 1.4; padding: 0 1em; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } h2 { margin-top: 2em; border-bottom:
1px solid #ddd; } nav a { margin-right: 1em; } .meta { color: #555; font-size: 0.9em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ddd; padding: 3px 6px; text-align: right; }
td { white-space: nowrap; } .wide { overflow-x: auto; }
th:first-child, td:first-child { text-align: left; } th { background: #f4f4f4; }
figure { margin: 1em 0; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption, caption { color: #555; font-size: 0.85em; caption-side: bottom; text-align: left; }
"""


def table_html(table: Table) -> str:
    """A :class:`~hpnsim.report.section.Table` as HTML, every cell escaped.

    >>> print(table_html(Table(["job"], [["<b>x</b>"]])).split("<tbody>")[1])
    <tr><td>&lt;b&gt;x&lt;/b&gt;</td></tr></tbody></table></div>
    """
    head = "".join(f"<th>{html.escape(h)}</th>" for h in table.headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>"
                   for row in table.rows)
    caption = f"<caption>{html.escape(table.caption)}</caption>" if table.caption else ""
    return (f'<div class="wide"><table>{caption}<thead><tr>{head}</tr></thead><tbody>{body}'
            "</tbody></table></div>")


def figure_html(figure: Figure, folder: Path, svg: bool = True) -> str:
    """Save ``figure`` as PNG (and SVG) in ``folder``; an ``<figure>`` embedding the PNG."""
    png, svg = save_figure(figure.fig, folder, figure.stem, svg=svg)
    data = base64.b64encode(png.read_bytes()).decode("ascii")
    alt = html.escape(figure.caption, quote=True)
    return (f'<figure><img alt="{alt}" src="data:image/png;base64,{data}">'
            f"<figcaption>{html.escape(figure.caption)} (Also saved as "
            f"{html.escape(png.name)}{f' and {html.escape(svg.name)}' if svg else ''}.)"
            "</figcaption></figure>")


def page_html(title: str, meta: str, sections: list, folder: Path, svg: bool = True) -> str:
    """The whole page: a title, a line of what ran, a table of contents, the sections."""
    nav = " ".join(f'<a href="#{anchor}">{html.escape(heading)}</a>'
                   for anchor, heading, _ in sections)
    body = []
    for anchor, heading, parts in sections:
        body.append(f'<section id="{anchor}"><h2>{html.escape(heading)}</h2>')
        for part in parts:
            body.append(table_html(part) if isinstance(part, Table)
                        else figure_html(part, folder, svg))
        body.append("</section>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>"
            f"<h1>{html.escape(title)}</h1><p class=\"meta\">{html.escape(meta)}</p>"
            f"<nav>{nav}</nav>\n" + "\n".join(body) + "\n</body></html>\n")


def write_report(folder: str | Path, out: str | Path | None = None, svg: bool = True) -> Path:
    """Render the results in ``folder`` (``results.json`` or ``demo.json``) to ``out``
    (default ``folder/index.html``), with every figure as PNG and (``svg``) SVG beside it.

    Raises :class:`~hpnsim.errors.InputError` (field ``DIR``) before drawing anything when
    ``folder`` holds no hpnsim result.

    Examples
    --------
    >>> import tempfile
    >>> from hpnsim.scenario.runner import run
    >>> d = tempfile.mkdtemp()
    >>> _ = run({"fabric": {"template": "fat_tree", "k": 4},
    ...          "collectives": [{"name": "a<b", "sizes": "1M:2M", "algo": "ring"}]}).save(d)
    >>> page = write_report(d).read_text()
    >>> "a&lt;b" in page, "a<b" in page, "https://" in page
    (True, False, False)
    """
    from hpnsim import __version__

    folder = Path(folder)
    kind, data = load_results(folder)
    out = Path(out) if out is not None else folder / "index.html"
    if kind == "run":
        sections = run_sections(data)
        scenario = data.get("scenario", {})
        title = f"hpnsim report: {scenario.get('name') or 'scenario run'}"
        meta = (f"hpnsim run of {len(data['jobs'])} job(s) and {len(data['collectives'])} "
                f"collective(s) on {data['fabric'].get('template', '')} "
                f"({data['fabric'].get('gpus', 0):,} GPUs), routing "
                f"{scenario.get('routing', 'ecmp')}, seed {scenario.get('seed', 0)}; "
                f"read from {folder / 'results.json'}; hpnsim {__version__}.")
    else:
        sections = demo_sections(data)
        title = ("hpnsim demo: HPN 7.0 against a 3-tier Clos (DCN+): cost, collectives, "
                 "training, a failure, a shared cluster")
        variant = {"quick": "hpnsim demo --quick (small sizes: a smoke run, not the "
                            "15,360-GPU figures)",
                   "full": "hpnsim demo"}.get(data["config"].get("variant"), "hpnsim demo")
        meta = (f"{variant}, seed {data['config'].get('seed', 0)}; read from "
                f"{folder / 'demo.json'}; hpnsim {__version__}.")
    out.parent.mkdir(parents=True, exist_ok=True)
    from hpnsim.results import write_atomic

    return write_atomic(out, page_html(title, meta, sections, out.parent, svg))
