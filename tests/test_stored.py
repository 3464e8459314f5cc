"""Files an older kvmagic saved still read: their table and notes come back as that kvmagic showed them.

The two files were saved by kvmagic before results kept a record per (configuration, strategy) (format 2):
a plain sweep with steps, limits and the frontier, and a comparison of strategies with limits.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from kvmagic import BenchmarkResult
from kvmagic.core.config import Config
from kvmagic.core.kvbytes import KVSizes
from kvmagic.core.spec import BenchSpec
from kvmagic.core.strategy import DYNAMIC, OFF, parse_list
from kvmagic.errors import KVMagicError

DATA = Path(__file__).resolve().parent / "data"


def _saved(name: str) -> BenchmarkResult:
    return BenchmarkResult.read_json(DATA / name)


def test_a_plain_sweep_saved_in_format_2_reads_as_it_was_shown() -> None:
    result = _saved("format2_plain.json")
    assert result.plain and result.strategies == [OFF, DYNAMIC] and result.configs == [Config(12, 2), Config(12, 3)]
    frame = result.to_dataframe()
    # what the older kvmagic's table said, from the same file
    assert frame["speedup"].tolist() == pytest.approx([1.1957486938848862, 1.3815174703918942])
    assert (frame["speedup_ci_low"][0], frame["speedup_ci_high"][1]) == pytest.approx(
        (1.1443768643668704, 1.4577570055362172)
    )
    assert frame["uncached_ttft_s"][0] == pytest.approx(0.006083028001739876)
    assert frame["kv_predicted_mib"].tolist() == pytest.approx([0.025390625, 0.02734375])
    assert frame["cached_of_limit"][1] == pytest.approx(0.18278674974410453)
    assert frame["cached_peak_mib"][1] == pytest.approx(375.875)
    assert result.facts.natural_prompt_tokens and result.spec.steps and not result.partial
    assert set(result.steps(Config(12, 3)).columns) == {"uncached_s", "cached_s"}
    assert "frontier (22.1 GiB free, around 12+3 tokens): uncached holds up to 2048 tokens" in " ".join(result.notes())
    assert "prompt_sha256" in result.setup() and "chat" not in result.metadata  # the request lives in the spec


def test_a_comparison_saved_in_format_2_reads_as_it_was_shown() -> None:
    result = _saved("format2_strategies.json")
    assert not result.plain and result.strategies == list(parse_list("off,dynamic,static"))
    frame = result.to_dataframe()
    assert frame["speedup"].tolist() == pytest.approx([1.0, 1.1458692989635018, 1.0726040603228117])
    assert frame["cache_tokens"].tolist() == pytest.approx([0.0, 13.0, 13.015625])
    assert frame["of_limit"].tolist() == pytest.approx([0.17453425679211687, 0.16285442324926708, 0.15244174512459596])
    assert math.isnan(frame["compile_s"][2])


def test_a_result_saved_now_reads_back_equal(tmp_path) -> None:
    for name in ("format2_plain.json", "format2_strategies.json"):
        old = _saved(name)
        path = tmp_path / name
        old.save(path)
        again = BenchmarkResult.read_json(path)
        assert again == old
        pd.testing.assert_frame_equal(again.to_dataframe(), old.to_dataframe())


def test_a_file_that_kept_one_positions_bytes_predicts_as_it_did(tmp_path) -> None:
    """Format 3 as kvmagic wrote it before the sizes per layer: one position's bytes over every layer."""
    data = json.loads(_saved("format2_plain.json").to_json())
    assert data["facts"].pop("kv_sizes") == {
        "position_bytes": 2048, "windows": [None], "keep": {"windowed": False, "kept": 0, "view": False, "fixed_bytes": 0}
    }  # fmt: skip
    data["facts"]["kv_position_bytes"] = 2048
    result = BenchmarkResult.from_json(json.dumps(data))
    assert result.facts.kv_sizes == KVSizes(2048, (None,))
    assert "kv_sizes" not in result.setup()  # a comparison with a newer run would list them as a difference
    assert result.to_dataframe()["kv_predicted_mib"].tolist() == [2048 * 13 / 2**20, 2048 * 14 / 2**20]


def test_a_request_that_called_the_marked_prefix_split_reads_as_marked() -> None:
    """``--prefix marked`` was ``--prefix split`` before a split came to mean a model over ranks."""
    saved = BenchmarkResult("tiny", [], spec=BenchSpec.of(prefix="marked")).to_dict()
    saved["spec"] = {**saved["spec"], "prefix": "split"}
    assert BenchmarkResult.from_dict(saved).spec.prefix == "marked"


def test_only_a_file_reads_split_as_the_marked_prefix() -> None:
    """The older word is a file's alone: asked for now, it is refused with the words the option takes."""
    with pytest.raises(KVMagicError, match=r"^prefix must be a number of tokens >= 1 or 'marked', got 'split'$"):
        BenchSpec.of(prefix="split")


def test_a_reused_prefix_is_kept_among_the_runs_facts_where_the_file_kept_it() -> None:
    """The tokens the warm twins reused are the prefix's own data now, written where a file of the current format
    keeps them (beside the run's facts, so that an older kvmagic reads them) and read back from there; a run
    without a prefix writes none there, as before, and reads back with none."""
    result = BenchmarkResult("tiny", [], spec=BenchSpec.of(prefix=4), addons={"prefix": 4})
    saved = json.loads(result.to_json())
    assert saved["facts"] == {**json.loads(BenchmarkResult("tiny", []).to_json())["facts"], "prefix_tokens": 4}
    back = BenchmarkResult.from_dict(saved)
    assert back.addons == {"prefix": 4} and back.prefix_tokens == 4 and back.facts == result.facts
    assert back.setup()["prefix_tokens"] == 4 and back.spec.prefix == 4
    plain = json.loads(BenchmarkResult("tiny", []).to_json())
    assert plain["facts"]["prefix_tokens"] is None
    again = BenchmarkResult.from_dict(plain)
    assert again.addons == {} and again.prefix_tokens is None and "prefix_tokens" not in again.setup()
