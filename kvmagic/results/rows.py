"""The columns of a result's table, declared once each: a comparison's row per (configuration, strategy), and the
plain run's view of its two rows side by side.

A comparison's row (:class:`Row`) is one measurement against the reference's at the same configuration. The plain
run is the comparison ``off,dynamic``; its view (:class:`PairRow`) shows those two rows side by side, one row per
configuration, each ``uncached_*`` and ``cached_*`` column naming the strategy's row and the column it shows. An
add-on declares its own columns in its folder, read from the same rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from kvmagic.core.strategy import DYNAMIC, FULL_CACHE, OFF
from kvmagic.results.columns import Column, column, declare, missing, some_value
from kvmagic.results.measurement import Pair
from kvmagic.results.pareto_marks import MIN_STRATEGIES

if TYPE_CHECKING:
    from collections.abc import Mapping

    import pandas as pd

    from kvmagic.core.config import Config
    from kvmagic.core.kvbytes import KVSizes
    from kvmagic.core.strategy import Strategy
    from kvmagic.results.benchmark_record import BenchmarkRecord
    from kvmagic.results.measurement import Measurement
    from kvmagic.results.records import Mismatch

__all__ = ["MIB", "PAIR", "ROWS", "PairRow", "Row", "figures", "short_mismatch"]

MIB = 2**20


def figures(m: Measurement) -> dict[str, float]:
    """One measurement's figures, as the tables show them: its times and spread, what its runs left, its
    compile. A measurement read from an older file may hold its bytes only in its hooked run."""
    profile = m.profile
    kv_bytes = m.kv_bytes if m.kv_bytes is not None or profile is None else profile.kv_bytes
    peak_bytes = m.peak_bytes if m.peak_bytes is not None or profile is None else profile.peak_bytes
    return {
        "seconds": m.median_s,
        "min_s": min(m.seconds),
        "iqr_s": m.iqr_s,
        "ttft_s": m.ttft_s if not math.isnan(m.ttft_s) or profile is None else profile.ttft_s,
        "tok_s": m.decode_tok_s,
        "kv_cache_mib": math.nan if kv_bytes is None else kv_bytes / MIB,
        "peak_mib": math.nan if peak_bytes is None else peak_bytes / MIB,
        "compile_s": m.compile_s,
    }


@dataclass(frozen=True)
class Row:
    """One strategy at one configuration, as a comparison's table reads it: its measurement (None where it did
    not run here) against the reference's at the same configuration."""

    record: BenchmarkRecord
    config: Config
    strategy: Strategy
    m: Measurement | None
    reference: Measurement | None
    marks: Mapping[tuple[Config, Strategy], bool | None]  # the trade-off frontier's, found once for the table

    @cached_property
    def figures(self) -> dict[str, float]:
        return figures(self.m) if self.m is not None else {}

    def figure(self, name: str) -> float:
        return self.figures.get(name, math.nan)

    @property
    def identical(self) -> bool | None:
        return None if self.m is None else self.m.identical

    @property
    def sizes(self) -> KVSizes | None:
        return self.record.facts.kv_sizes

    @cached_property
    def pair(self) -> Pair | None:
        """This strategy against the reference, round by round (after ``-r auto``, with its anytime interval)."""
        if self.m is None or self.reference is None:
            return None
        return Pair(self.reference, self.m, sequential=self.record.spec.repeat == "auto")

    def speedup(self, which: int) -> float:
        """The speed-up (``which`` 0) or an end of its 95% interval (1, 2); the reference's own row is 1 by
        definition, with no interval to give."""
        pair = self.pair
        if pair is None or (which and self.m is self.reference):
            return math.nan
        return (pair.speedup, *pair.interval)[which]

    def quality(self, name: str) -> float:
        return math.nan if self.m is None or self.m.quality is None else float(getattr(self.m.quality, name))

    @property
    def note(self) -> str:
        """Why the strategy could not run here, or what a reader of its row should know; a press says when its ratio
        drops none of the prompt or when it held no less than the full cache."""
        said = self.record.skipped.get(self.strategy, "") or self.record.remarks.get(self.strategy, "")
        return "; ".join(text for text in (said, self._masked()) if text)

    def _masked(self) -> str:
        """What a press's row must say: that its ratio drops none of this prompt's tokens (its cache is the full
        one), or that it dropped prompt positions yet held as many bytes as the full cache, hiding them from
        attention (kvpress's head-wise masks) instead of freeing them, or its bytes read as a broken promise."""
        press, m, config = self.strategy.press, self.m, self.config
        if press is None or m is None:
            return ""
        if press.kept(config.prompt_tokens) >= config.prompt_tokens:
            return (
                f"{press.method} at ratio {press.ratio:g} drops none of the {config.prompt_tokens} prompt tokens: its "
                "cache is the full one"
            )
        full = self._full_bytes()
        if m.kv_bytes is None or not full or m.kv_bytes < full:
            return ""
        return (
            f"holds {m.kv_bytes / MIB:.4g} MiB, no less than the full cache: {press.method} masks the positions it "
            "drops (attention skips them) instead of freeing them"
        )

    def _full_bytes(self) -> int | None:
        """The full cache's bytes here: the dynamic row's where it ran, else as predicted layer by layer."""
        dynamic = self.record.measurement(FULL_CACHE, self.config)
        if dynamic is not None and dynamic.kv_bytes:
            return dynamic.kv_bytes
        return None if self.sizes is None else self.sizes.after(*self.config)

    def promised_mib(self) -> float:
        """What a press's ratio promises the cache holds at the end, in full precision; NaN for other strategies."""
        press, sizes, config = self.strategy.press, self.sizes, self.config
        if press is None or sizes is None:
            return math.nan
        positions = press.promised_positions(config.prompt_tokens, config.new_tokens)
        return sizes.held_bytes(positions, config.batch) / MIB

    def cache_tokens(self) -> float:
        """Positions the returned cache has room for, in full-precision keys and values: a static cache's length
        (sized for this row, not an earlier longer one), fewer than it holds for a quantized one."""
        m, sizes = self.m, self.sizes
        return (
            math.nan
            if m is None or m.kv_bytes is None or sizes is None
            else sizes.positions(m.kv_bytes, m.config.batch)
        )


@dataclass(frozen=True)
class PairRow:
    """The plain run's row: ``off``'s and ``dynamic``'s rows at one configuration, side by side."""

    record: BenchmarkRecord
    pair: Pair
    sides: dict[Strategy, dict[str, Any]]

    @property
    def config(self) -> Config:
        return self.pair.config

    @property
    def identical(self) -> bool:
        return self.pair.identical


def short_mismatch(mismatch: Mismatch) -> str:
    """Where, and which tokens, for a table cell."""
    sequence = f" in sequence {mismatch.sequence + 1}" if mismatch.sequence else ""
    return f"{mismatch.position}: {mismatch.expected} vs {mismatch.actual}{sequence}"


def _figure(name: str) -> Any:
    return lambda row: row.figure(name)


_PEAK = (
    "peak memory over the timed runs, reset before and read after each, outside the timed region: "
    "on CUDA and XPU the allocator's peak (`max_memory_allocated`) summed over the model's devices (tensors: "
    "weights, cache, activations; not the allocator's reserve), plus the growth of resident memory of a mixed "
    "device map's CPU share; on CPU the peak resident memory of the whole Python process (weights included), "
    "from the kernel's high-water mark on Linux, empty where only a sampling thread could tell "
    "(`Measurement.peak_source` names the source); with `--tp`, the fullest rank's"
)
_TTFT = "time to first token: a one-token `generate` after the timed runs (prompt processing included)"
_TOK_S = "decode speed: tokens after the first per second, `(new_tokens - 1) / (median time - time to first token)`"


# Columns of both tables (the plain run's view reads each of these from one side's row, or from the pair).
def _batched(frame: pd.DataFrame) -> bool:
    return any(not missing(b) and b > 1 for b in frame.get("batch", ()))


def _separates(frame: pd.DataFrame) -> bool:
    """Some configuration has :data:`~kvmagic.results.pareto_marks.MIN_STRATEGIES` rows that ran or more, and not every
    one of them is on its trade-off frontier: the marks then say something. A configuration is what the columns that
    identify a row, but its strategy, say."""
    ran = frame[[not missing(value) for value in frame["pareto"]]]
    keys = [name for name in ran.columns if column(name).identifies and name != "strategy"]
    compared = not ran.empty and int(ran.groupby(keys).size().max()) >= MIN_STRATEGIES
    return compared and not all(value is True for value in ran["pareto"])


PROMPT = Column[Any]("prompt_tokens", "tokens in the prompt", "tokens", read=lambda r: r.config.prompt_tokens,
                     shown=True, identifies=True)  # fmt: skip
NEW = Column[Any]("new_tokens", "tokens generated by each timed run", "tokens", read=lambda r: r.config.new_tokens,
                  shown=True, identifies=True)  # fmt: skip
BATCH = Column[Any](
    "batch", "sequences per `generate`, the prompt's ids in every one; tok/s, KV bytes and peak memory are the "
    "whole batch's", read=lambda r: r.config.batch, shown=True, shown_when=_batched, identifies=True,
)  # fmt: skip
SPEEDUP = Column[Row](
    "speedup", "the reference's median seconds over this strategy's: `uncached_s / cached_s` in the plain table",
    "times faster", "speedup", read=lambda r: r.speedup(0), side=(DYNAMIC, "speedup"), shown=True,
)  # fmt: skip
IDENTICAL = Column[Any](
    "identical", "every timed run generated the same tokens as the reference's first run; if not, the first "
    "differing position is printed", read=lambda r: r.identical, shown=True, gives_way=(7, 2, 2),
)  # fmt: skip
KV_CACHE = Column[Row](
    "kv_cache_mib", "the KV cache counted from the cache object the (cached) timed run returned: every tensor it "
    "holds, each storage once (dynamic, static and quantized caches, packed quantized tensors included)", "MiB",
    read=_figure("kv_cache_mib"), side=(DYNAMIC, "kv_cache_mib"), shown=True, gives_way=(5, 4, 5),
)  # fmt: skip
CI_LOW = Column[Row](
    "speedup_ci_low", "lower end of the 95% interval of the true speed-up (docs/statistics.md); needs `-r 3` or more",
    "times faster", "speedup", read=lambda r: r.speedup(1), side=(DYNAMIC, "speedup_ci_low"),
)  # fmt: skip
CI_HIGH = Column[Row](
    "speedup_ci_high", "upper end of the 95% interval of the true speed-up (docs/statistics.md); needs `-r 3` or "
    "more", "times faster", "speedup", read=lambda r: r.speedup(2), side=(DYNAMIC, "speedup_ci_high"),
)  # fmt: skip

# A comparison's row: one strategy at one configuration, against the reference's runs there.
ROWS: tuple[Column[Any], ...] = declare(
    PROMPT, NEW, BATCH,
    Column[Row]("strategy", "the KV-cache strategy of this row (docs/strategies.md)", form="text",
                read=lambda r: str(r.strategy), shown=True, identifies=True),
    Column[Row]("seconds", "median seconds per timed run of this strategy", "s", read=_figure("seconds"), shown=True,
                gives_way=(6, 3, 3)),
    Column[Row]("tok_s", _TOK_S + ", from the timed runs and a one-token run", "tokens/s", read=_figure("tok_s"),
                shown=True, gives_way=(1, 1, 1)),
    SPEEDUP, CI_LOW, CI_HIGH, IDENTICAL,
    Column[Row](
        "first_mismatch", "where the strategy's tokens first differed from the reference's: "
        "`position: 'expected' (id) vs 'actual' (id)`; quantized caches usually differ", form="text",
        read=lambda r: "" if r.m is None or r.m.mismatch is None else short_mismatch(r.m.mismatch),
    ),
    Column[Row](
        "top1_agreement", "the share of steps whose most likely next token is the full cache's (`dynamic`'s), both "
        "teacher-forced along the same tokens (the full cache's greedy continuation, or `--quality-text`) after the "
        "timed runs; 1 for a lossless strategy (docs/strategies.md)", "share",
        read=lambda r: r.quality("top1_agreement"), shown=True, shown_when=some_value("top1_agreement"),
        gives_way=(2, 5, 4),
    ),
    Column[Row](
        "kl_nats", "the mean KL divergence per step of the strategy's next-token distribution from the full cache's, "
        "KL(full || strategy), in nats, on the same forced steps; 0 for a lossless strategy (a step that differs by "
        "float32 rounding alone, KL at most 1e-9, counts as the full cache's own in all three figures)", "nats",
        read=lambda r: r.quality("kl_nats"), shown=True, shown_when=some_value("kl_nats"), gives_way=(3, 6, 7),
    ),
    Column[Row](
        "ppl_ratio", "the perplexity of the forced continuation under the strategy over its perplexity under the full "
        "cache; above 1, the strategy finds the text less likely; 1 for a lossless strategy",
        read=lambda r: r.quality("ppl_ratio"),
    ),
    KV_CACHE,
    Column[Row](
        "kv_promised_mib", "a press (`press:METHOD:RATIO`): the bytes its ratio promises the returned cache holds, "
        "in full-precision keys and values: the prompt's positions it keeps, int(prompt_tokens x (1 - ratio)), plus "
        "every new token's but the last; set beside `kv_cache_mib`, counted. Empty for other strategies", "MiB",
        read=lambda r: r.promised_mib(),
    ),
    Column[Row](
        "cache_tokens", "positions the returned cache has room for, in full-precision keys and values: a static "
        "cache's length (sized for this row), fewer than it holds for a quantized one; sliding-window layers counted "
        "as `kv_predicted_mib` counts them (empty where every layer is at its window)", "tokens",
        read=lambda r: r.cache_tokens(),
    ),
    Column[Row]("peak_mib", "peak memory over the strategy's timed runs, read as `uncached_peak_mib` is", "MiB",
                read=_figure("peak_mib"), shown=True, gives_way=(0, 0, 0)),
    Column[Row]("ttft_s", _TTFT + ", the median of three one-token runs interleaved as the rounds are", "s",
                read=_figure("ttft_s")),
    Column[Row]("min_s", "fastest timed run of this strategy", "s", read=_figure("min_s")),
    Column[Row]("iqr_s", "interquartile range of this strategy's timed runs; needs `-r 3` or more (NaN below)", "s",
                read=_figure("iqr_s")),
    Column[Row]("compile_s", "with `--compile`: the first call at this shape minus the median timed run", "s",
                read=_figure("compile_s")),
    Column[Row](
        "pareto", "on the trade-off frontier: no other row of the same configuration is at once as fast or faster "
        "(median seconds; two rows whose rounds cannot tell their times apart tie on it), holds no more KV bytes and "
        "loses no more quality (`kl_nats`), and better on one of them; a quality not read is not guessed: two rows "
        "without it tie on it, and a row without it leaves the frontier only to one with `kl_nats` 0 that is as good "
        "on the rest and better on one (docs/choosing.md); empty for a strategy that did not run; shown where some "
        "configuration has three strategies or more that ran", read=lambda r: r.marks.get((r.config, r.strategy)),
        shown=True, shown_when=_separates, gives_way=(4, None, 6),
    ),
    Column[Row](
        "note", "why a strategy could not run here: the package missing (`pip install 'kvmagic[quantized]'` or "
        "`'kvmagic[press]'`), no GPU, a strategy the installed transformers (or kvpress) lacks, a model whose layer "
        "types forbid it, or the error it raised in its warm-up; for one that ran, what its reader should know: a "
        "press on a model kvpress has not tested, or one that held no less than the full cache (it masks positions "
        "instead of freeing them)", form="text", read=lambda r: r.note, shown=True,
    ),
)  # fmt: skip


PAIR: tuple[Column[Any], ...] = declare(
    PROMPT, NEW, BATCH,
    Column[PairRow]("uncached_s", "seconds per run with the cache off (`off`, `use_cache=False`): the median of the "
                    "timed runs", "s", side=(OFF, "seconds"), shown=True),
    Column[PairRow]("cached_s", "seconds per run with the cache on (`dynamic`, `use_cache=True`): the median of the "
                    "timed runs", "s", side=(DYNAMIC, "seconds"), shown=True),
    SPEEDUP, IDENTICAL,
    Column[PairRow]("uncached_ttft_s", _TTFT + ", cache off", "s", side=(OFF, "ttft_s")),
    Column[PairRow]("cached_ttft_s", "the same, cache on", "s", side=(DYNAMIC, "ttft_s")),
    Column[PairRow]("uncached_tok_s", _TOK_S + ", cache off", "tokens/s", side=(OFF, "tok_s")),
    Column[PairRow]("cached_tok_s", "the same, cache on", "tokens/s", side=(DYNAMIC, "tok_s")),
    KV_CACHE,
    Column[PairRow](
        "kv_predicted_mib", "the same size predicted from the model's config, layer by layer: 2 x KV heads x head_dim "
        "x positions x element size x batch, positions = prompt + new tokens - 1 (the last token's keys and values are "
        "never computed) in a full-attention layer; a sliding-window layer as the installed transformers keeps it "
        "(probed): 5.x its window after a decode step (the prompt after the prefill alone) plus an 8-byte window, "
        "4.55 every position", "MiB",
        read_pair=lambda r: math.nan if (s := r.record.facts.kv_sizes) is None else s.after(*r.config) / MIB,
    ),
    Column[PairRow]("uncached_peak_mib", _PEAK + "; cache off", "MiB", side=(OFF, "peak_mib")),
    Column[PairRow]("cached_peak_mib", "the same, cache on", "MiB", side=(DYNAMIC, "peak_mib")),
    Column[PairRow]("uncached_min_s", "fastest timed run, cache off", "s", side=(OFF, "min_s")),
    Column[PairRow]("cached_min_s", "fastest timed run, cache on", "s", side=(DYNAMIC, "min_s")),
    Column[PairRow]("uncached_iqr_s", "interquartile range of the timed runs, cache off; needs `-r 3` or more (NaN "
                    "below)", "s", side=(OFF, "iqr_s")),
    Column[PairRow]("cached_iqr_s", "interquartile range of the timed runs, cache on; needs `-r 3` or more (NaN "
                    "below)", "s", side=(DYNAMIC, "iqr_s")),
    CI_LOW, CI_HIGH,
)  # fmt: skip
