"""One self-contained HTML page of a result: what a colleague opens with no other file and no network.

The page is a function of the saved record alone (a report made now and one made later from the run's JSON are
the same page): the verdict and the notes, the short table with every column folded beneath it, the figures
``--plot`` draws (inline PNG), how it was measured, the prompt, the commands that rerun it, and the record itself,
so that ``kvbench --replay`` reads the page as it reads the JSON. Every text from the run (the prompt, a model's
name, a note) is escaped: a prompt is shown, never run as HTML.
"""

from __future__ import annotations

import base64
import html
import io
import json
from typing import TYPE_CHECKING, Any

from kvmagic.addons.html_report.rerun import rerun

if TYPE_CHECKING:
    from kvmagic.results.result import BenchmarkResult

__all__ = ["RECORD_ID", "recorded", "report_page"]

RECORD_ID = "kvmagic-record"  # the script element holding the record, as JSON
_STYLE = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI","Noto Sans","Noto Sans CJK KR",sans-serif;margin:0;color:#1b1f24}
main{max-width:1180px;margin:0 auto;padding:16px}
h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.15em;margin:1.4em 0 .4em;border-bottom:1px solid #d0d7de}
.sub{color:#57606a;margin:0 0 1em}
.verdict{background:#f6f8fa;border-left:4px solid #0969da;padding:.5em 1em;margin:1em 0}
.verdict p{margin:.3em 0}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;font-variant-numeric:tabular-nums;font-size:.92em}
th,td{padding:.25em .6em;border-bottom:1px solid #eaeef2;text-align:right;white-space:nowrap}
th{background:#f6f8fa}
img{max-width:100%;height:auto}
.panels{display:flex;flex-wrap:wrap;gap:8px}.panels img{flex:1 1 340px;min-width:0;max-width:560px;object-fit:contain}
pre{background:#f6f8fa;padding:.6em;overflow-x:auto;white-space:pre-wrap;word-break:break-word}
details{margin:.6em 0}summary{cursor:pointer;color:#0969da}
@media (max-width:600px){main{padding:10px}table{font-size:.72em}
th{white-space:normal;overflow-wrap:anywhere}th,td{padding:.2em .3em}}
footer{color:#57606a;font-size:.85em;margin:2em 0 1em}
"""


def report_page(result: BenchmarkResult) -> str:
    """The page, as text."""
    from kvmagic.results.display import to_html
    from kvmagic.results.shown import brief

    notes = result.notes()
    kept, _ = brief(notes)
    frame, setup = result.to_dataframe(), {"model": result.model, **result.setup()}
    wide = to_html(frame, {}, wide=True, uuid="every")
    sections = [
        f"<h1>What the KV cache does for {_esc(result.model)}</h1>",
        f"<p class='sub'>{_esc(_summary(result.metadata))}</p>",
        f"<div class='verdict'>{''.join(f'<p>{_esc(note)}</p>' for note in kept)}</div>" if kept else "",
        f"<div class='scroll'>{to_html(frame, setup, uuid='shown')}</div>",
        f"<details><summary>every column</summary><div class='scroll'>{wide}</div></details>",
        _figure(result),
        _notes(notes),
        _prompt(result),
        _rerun(result),
        f"<footer>kvmagic {_esc(str(result.metadata.get('kvmagic', '')))}</footer>",
        f"<script type='application/json' id='{RECORD_ID}'>{_embedded(result)}</script>",
    ]
    body = "\n".join(section for section in sections if section)
    return (
        "<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{_esc(f'kvmagic: {result.model}')}</title><style>{_STYLE}</style></head>\n"
        f"<body><main>\n{body}\n</main></body></html>\n"
    )


def _notes(notes: list[str]) -> str:
    listed = "".join(f"<li>{_esc(note)}</li>" for note in notes)
    return f"<h2>Every note</h2><ul>{listed}</ul>" if notes else ""


def _prompt(result: BenchmarkResult) -> str:
    """The prompt as given, and the quality text a run judged along (a file its rerun names)."""
    prompt = result.facts.prompt
    shown = (
        f"<pre>{_esc(prompt)}</pre>"
        if prompt is not None
        else (f"<p>not kept: saved before kvmagic kept prompts (SHA-256 {_esc(result.facts.prompt_sha256)})</p>")
    )
    text = result.spec.quality_text
    quality = "" if text is None else f"<h2>The quality text (quality.txt)</h2><pre>{_esc(text)}</pre>"
    return f"<h2>The prompt</h2>{shown}{quality}"


def _rerun(result: BenchmarkResult) -> str:
    again = rerun(result)
    return (
        "<h2>Rerun it</h2><p>From a terminal (<code>pip install kvmagic</code>):</p>"
        f"<pre>{_esc(again.command)}</pre><p>In a notebook, after <code>%load_ext kvmagic</code>:</p>"
        f"<pre>{_esc(again.cell)}</pre><p>Rerun it and compare with this page in one step: "
        "<code>kvbench --replay THIS_PAGE.html</code>.</p>"
    )


def recorded(page: str) -> dict[str, Any]:
    """The record a page holds (what :func:`report_page` embedded), for ``--replay`` and ``--report``."""
    from kvmagic.errors import KVMagicError

    start = page.find(f"id='{RECORD_ID}'>")
    end = page.find("</script>", start)
    if start < 0 or end < 0:
        raise KVMagicError("this page holds no kvmagic result: make one with {save} PATH.html", "save")
    found: dict[str, Any] = json.loads(page[start + len(f"id='{RECORD_ID}'>") : end])
    return found


def _esc(text: str) -> str:
    """Text from the run, safe in HTML."""
    return html.escape(text, quote=True)


def _summary(metadata: dict[str, Any]) -> str:
    """The line under the title: where it ran, in what, with which versions."""
    parts = [
        str(metadata.get("device") or ""),
        str(metadata.get("dtype") or ""),
        *(f"{name} {metadata[name]}" for name in ("torch", "transformers") if metadata.get(name)),
    ]
    return ", ".join(part for part in parts if part)


def _figure(result: BenchmarkResult) -> str:
    """The figures ``--plot`` draws, one inline PNG per panel (side by side where the page is wide, one under the
    other on a phone, each legible at its width); none where no configuration finished."""
    from kvmagic.addons.plot.sweep_plot import plot_result
    from kvmagic.errors import KVMagicError

    try:
        figure = plot_result(result)
    except KVMagicError:
        return ""
    figure.draw_without_rendering()  # lays the panels out, so that each one's extent is known
    images = []
    for axes in figure.axes:
        bounds = axes.get_tightbbox() if axes.get_visible() and axes.axison else None
        if bounds is None:
            continue
        extent = bounds.transformed(figure.dpi_scale_trans.inverted()).padded(0.08)
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=100, bbox_inches=extent)
        data = base64.b64encode(buffer.getvalue()).decode("ascii")
        images.append(f"<img alt='{_esc(axes.get_title())}' src='data:image/png;base64,{data}'>")
    title = figure._suptitle.get_text() if figure._suptitle is not None else ""  # type: ignore[attr-defined]
    return f"<h2>Figures</h2><p>{_esc(title)}</p><div class='panels'>{''.join(images)}</div>"


def _embedded(result: BenchmarkResult) -> str:
    """The record as JSON that a script element holds safely: every ``<`` escaped, so that no ``</script>`` or
    ``<!--`` in a prompt can end it early."""
    from kvmagic.results.serialize import json_text

    return json_text(result.to_dict()).replace("<", "\\u003c")
