"""``--save report.html``: one page a colleague opens offline, the table, figures, verdict, notes, environment and the
command that reruns it, made of the saved record alone."""

from __future__ import annotations

import base64
import html.parser
import shlex

import pytest

from kvmagic.addons.html_report.page import recorded, report_page
from kvmagic.addons.html_report.rerun import rerun
from kvmagic.results.result import BenchmarkResult

from .conftest import PROMPT
from .records import rounds

HOSTILE = "인공지능은 <b>데이터</b>를 </script><!-- 학습한다 & 'quotes'"


class _Page(html.parser.HTMLParser):
    """What a browser would find on the page: its elements' text, its images, its script's JSON."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []
        self.images: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        found = dict(attrs)
        if tag == "img":
            self.images.append(found.get("src") or "")
        for name in ("href", "src"):
            if found.get(name) and not str(found[name]).startswith("data:"):
                self.links.append(str(found[name]))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parsed(page: str) -> _Page:
    parsed = _Page()
    parsed.feed(page)
    return parsed


@pytest.fixture(scope="module")
def sweep(tiny) -> BenchmarkResult:
    from kvmagic import run_benchmark

    return run_benchmark(tiny, HOSTILE, new_tokens=(3, 6), repeat=3, warmup_tokens=0, cache="off,dynamic,static")


def test_the_page_holds_the_table_the_figures_the_verdict_and_the_rerun_command(sweep, tmp_path) -> None:
    path = tmp_path / "r.html"
    sweep.save(path)
    page = path.read_text(encoding="utf-8")
    parsed = _parsed(page)
    text = " ".join(parsed.text)
    assert parsed.links == []  # nothing to fetch: it opens offline
    assert parsed.tags.count("table") >= 2 and "every column" in text  # the short table, the full one folded
    assert len(parsed.images) >= 2
    for image in parsed.images:  # each a PNG inline
        assert base64.b64decode(image.removeprefix("data:image/png;base64,"))[:8] == b"\x89PNG\r\n\x1a\n"
    for note in sweep.notes():  # the verdict and every note, in words the page escaped
        assert note in text
    assert HOSTILE in text and "<b>데이터</b>" not in page.split("<script")[0]  # shown, never run as HTML
    assert len(page.encode()) < 1_000_000


def test_the_rerun_command_asks_the_command_for_the_same_request_and_prompt(sweep) -> None:
    from kvmagic.frontends.cli import parser
    from kvmagic.frontends.options import bench_spec, defaults

    again = rerun(sweep)
    words = shlex.split(again.command)
    assert words[:3] == ["kvbench", "-m", "tiny"] and words[-1] == HOSTILE
    args = parser().parse_args(words[1:])
    assert bench_spec(args, defaults()) == sweep.spec
    assert (args.dtype, args.prompt) == ("float32", HOSTILE)
    load, cell = again.cell.split("\n\n")
    assert load == "%kvload tiny --dtype float32 --attn-implementation sdpa" and cell.endswith(f"\n{HOSTILE}")


def test_a_page_holds_its_record_and_a_page_made_from_the_saved_json_is_the_same(sweep, tmp_path) -> None:
    page = report_page(sweep)
    assert BenchmarkResult.from_dict(recorded(page)) == sweep
    sweep.save(tmp_path / "r.json")
    again = BenchmarkResult.read_json(tmp_path / "r.json")
    assert report_page(again) == page


def test_a_result_saved_before_prompts_were_kept_says_so_and_reruns_with_a_placeholder() -> None:
    old = BenchmarkResult("tiny", rounds((8, 4), [(2.0, 1.0)] * 3))
    page = report_page(old)
    assert "not kept: saved before kvmagic kept prompts" in page
    assert rerun(old).command.endswith(" PROMPT") and rerun(old).missing


def test_several_models_are_refused_a_page_in_one_line(tmp_path) -> None:
    from kvmagic.addons.models.models_result import ModelsResult
    from kvmagic.errors import KVMagicError

    models = ModelsResult([BenchmarkResult("tiny", rounds((8, 4), [(2.0, 1.0)]))], {})
    with pytest.raises(KVMagicError, match=r"a report shows one model's run: save each model's"):
        models.save(tmp_path / "models.html")


def test_the_magic_writes_a_page_and_says_where(shell, tmp_path, capsys) -> None:
    shell.run_cell_magic("kvbench", f"-n 2 -w 0 --save {tmp_path / 'cell.html'}", PROMPT)
    assert capsys.readouterr().out == f"saved {tmp_path / 'cell.html'}\n"
    assert recorded((tmp_path / "cell.html").read_text(encoding="utf-8"))["facts"]["prompt"] == PROMPT
