"""The options of ``%kvload``/``%%kvbench`` and of the ``kvbench`` command, declared once as data.

The magics turn these into ``@argument`` decorators, the command into an argparse parser, and both
hand the parsed values to the same functions here on their way to :func:`load_model` and
:func:`run_benchmark`, so the two front ends cannot drift apart. An option with ``configurable``
set is also a trait of ``KVMagics`` (``%config KVMagics.new_tokens = 128``): its flag defaults to
None, and None means "the configured default".
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from kvmagic.core.lengths import LENGTH_FORMS, parse_lengths
from kvmagic.errors import KVMagicError
from kvmagic.model.loading import DEFAULT_MODEL, DTYPES
from kvmagic.model.random_weights import SHIPPED

if TYPE_CHECKING:
    from kvmagic.results.data import BenchmarkResult

__all__ = [
    "BENCH_OPTIONS",
    "LOAD_OPTIONS",
    "Host",
    "Option",
    "add_arguments",
    "benchmark_kwargs",
    "configurable",
    "defaults",
    "finish",
    "load_kwargs",
    "prepare",
    "resolved",
]

Host = Literal["magic", "cli"]


def whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def at_least_one(text: str) -> int:
    number = whole_number(text)
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return number


def repeat_count(text: str) -> int | str:
    """A whole number of pairs, or ``auto``: as many as the speed-up's interval needs."""
    return "auto" if text.strip().lower() == "auto" else whole_number(text)


def lengths(text: str) -> list[int]:
    try:
        return parse_lengths(text)
    except KVMagicError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


@dataclass(frozen=True)
class Option:
    """One option: its argparse spelling, and whether it is a configurable default.

    ``cli_flags`` spells it differently for the command (``%kvload MODEL`` is ``kvbench --model MODEL``);
    ``hosts`` says where it exists at all (``-o`` and ``-v`` mean nothing outside a notebook).
    ``minimum`` and ``choices`` validate a configured default, which argparse never sees;
    ``words`` are what a numeric option also takes in place of a number (``-r auto``).
    """

    flags: tuple[str, ...]
    help: str
    dest: str
    default: Any = None
    type: Callable[[str], Any] | None = None
    action: str | type[argparse.Action] | None = None
    metavar: str | None = None
    configurable: bool = False
    cli_flags: tuple[str, ...] | None = None
    hosts: tuple[Host, ...] = ("magic", "cli")
    minimum: float | None = None
    choices: tuple[str, ...] | None = None
    words: tuple[str, ...] = ()

    def spelling(self, host: Host) -> tuple[str, ...]:
        return self.cli_flags if host == "cli" and self.cli_flags else self.flags

    def argparse_kwargs(self, host: Host) -> dict[str, Any]:
        """What ``add_argument`` takes, with the default spelled out in the help."""
        kwargs: dict[str, Any] = {"help": self.help + self._default_help(host)}
        if self.spelling(host)[0].startswith("-"):
            kwargs["dest"] = self.dest
        else:
            kwargs["nargs"] = "?"
        for name in ("type", "action", "metavar"):
            value = getattr(self, name)
            if value is not None:
                kwargs[name] = value
        # A configurable option's flag defaults to None so the configured value can fill it in.
        kwargs["default"] = None if self.configurable else self.default
        if self.action == "store_true":
            kwargs["default"] = False
        return kwargs

    def _default_help(self, host: Host) -> str:
        if self.default is None or (self.default is False and not self.configurable):
            return ""
        where = f"; %%config KVMagics.{self.dest}" if self.configurable and host == "magic" else ""
        return f" (default: {self.default}{where})"

    def check(self, value: Any) -> str | None:
        """Why ``value`` cannot be this option's default, or None when it can."""
        if value in self.words:
            return None
        if self.choices is not None and value not in self.choices:
            return f"must be one of {', '.join(self.choices)}, got {value!r}"
        if self.minimum is not None and value < self.minimum:
            return f"must be >= {self.minimum:g}, got {value!r}"
        return None


LOAD_OPTIONS: tuple[Option, ...] = (
    Option(("model",), "Hub id, local directory, or 'tiny' (offline).", "model", DEFAULT_MODEL,
           metavar="MODEL", configurable=True, cli_flags=("-m", "--model")),
    Option(("--dtype",), f"One of {', '.join(DTYPES)}; auto is float16 on CUDA, float32 otherwise.", "dtype", "auto",
           configurable=True, choices=DTYPES),
    Option(("--device-map",), "Passed to from_pretrained.", "device_map", "auto", configurable=True),
    Option(("--revision",), "Branch, tag or commit of a hub model.", "revision"),
    Option(("--gguf-file",), "Load this GGUF file from the model's repository or directory.", "gguf_file"),
    Option(("--attn-implementation",), "e.g. eager, sdpa, flash_attention_2.", "attn_implementation", configurable=True),
    Option(("--trust-remote-code",), "Run model code shipped with the repository.", "trust_remote_code",
           action="store_true"),
    Option(("--random-weights",), "Build the model from its config with seeded random weights instead of loading "
           "its weights: its real shape and timings, meaningless text, nothing downloaded. Configs ship for "
           f"{', '.join(SHIPPED)}; for another model, its config must be in the local cache or a directory.",
           "random_weights", action="store_true"),
)  # fmt: skip

BENCH_OPTIONS: tuple[Option, ...] = (
    Option(("-n", "--new-tokens"), f"Tokens to generate per timed run; a sweep: {LENGTH_FORMS}.", "new_tokens", 64,
           type=lengths, configurable=True, minimum=1),
    Option(("-p", "--prompt-tokens"), "Stretch (or cut) the prompt to this many tokens by repeating its own tokens; "
           "lengths as for -n.", "prompt_tokens", type=lengths),
    Option(("-w", "--warmup-tokens"), "Tokens per untimed warm-up run.", "warmup_tokens", 4, type=whole_number,
           configurable=True, minimum=0),
    Option(("-r", "--repeat"), "Interleaved uncached/cached pairs; medians are reported. auto: take pairs (at least 5) "
           "until the 95-percent interval of the speed-up is within --ci-target of it, or --auto-cap seconds pass.", "repeat", 1,
           type=repeat_count, configurable=True, minimum=1, words=("auto",)),
    Option(("--ci-target",), "With -r auto: the interval's half-width to reach, as a fraction of the speed-up.",
           "ci_target", 0.05, type=float, configurable=True, minimum=0),
    Option(("--auto-cap",), "With -r auto: stop taking pairs for a configuration after this many seconds.",
           "auto_cap", 60.0, type=float, configurable=True, minimum=0),
    Option(("--chat",), "Wrap the prompt in the tokenizer's chat template (--no-chat: do not).", "chat", False,
           action=argparse.BooleanOptionalAction, configurable=True),
    Option(("--profile",), "After the timed runs, one hooked run per condition measures time to first token, "
           "tokens/s, KV-cache bytes and peak memory (--no-profile: skip it, leave those columns empty and save "
           "one generate per condition).", "profile", True, action=argparse.BooleanOptionalAction, configurable=True),
    Option(("--expand",), "Replace {name} and {name.attr} in the cell with values from the notebook; {{ and }} "
           "stay literal braces (--no-expand: keep the text as written).", "expand", False,
           action=argparse.BooleanOptionalAction, configurable=True, hosts=("magic",)),
    Option(("-o", "--output"), "Return the BenchmarkResult (with --compare, the Comparison holding it) instead of a table.", "output", action="store_true",
           hosts=("magic",)),
    Option(("-v", "--var"), "Also store the BenchmarkResult in this variable.", "var", hosts=("magic",)),
    Option(("-q", "--quiet"), "Print nothing and show no progress bar (in a notebook, return nothing unless -o or --plot).", "quiet",
           action="store_true"),
    Option(("--plot",), "Draw time and speed-up against length (and per-step latency, when measured).", "plot",
           action="store_true", hosts=("magic",)),
    Option(("--save",), "Also write the result to PATH: .csv, .json (everything, loadable with "
           "BenchmarkResult.read_json and --compare) or .md.", "save", metavar="PATH"),
    Option(("--compare",), "Compare with a run saved by --save PATH.json: the change in speed-up per row, whether "
           "it exceeds both runs' spread, and any difference in how they were run.", "compare", metavar="PATH"),
    Option(("--threads",), "torch's CPU threads for this run, put back afterwards (default: torch's own); "
           "on a shared machine, 1 steadies the timings.", "threads", type=at_least_one, minimum=1, hosts=("cli",)),
    Option(("--fail-on",), "With --compare, exit with status 1 when a row moved past SPEC and the comparison calls "
           "the change significant: speedup:-5%% (fell by more than 5%%), cached_s:+10%%, uncached_s:+10%%; "
           "comma-separated or repeated.", "fail_on", action="append", metavar="SPEC", hosts=("cli",)),
    Option(("--cache",), "Compare KV-cache strategies instead, one row each against off: off, dynamic, static, "
           "offloaded, offloaded_static, quantized:quanto, quantized:hqq, quantized:fp8, or any other "
           "cache_implementation the installed transformers has; comma-separated.", "cache", metavar="LIST"),
    Option(("--kv-bits",), "Bits per value of a quantized:quanto (2, 4) or quantized:hqq (1, 2, 3, 4, 8) cache.",
           "kv_bits", type=whole_number),
    Option(("--compile",), "With --cache, add static+compile: the static cache under torch.compile (where "
           "transformers compiles generate; the compile is paid by an untimed run).", "compile", action="store_true"),
    Option(("--max-seconds",), "Refuse a benchmark estimated (from a short probe) to take longer; 0: no limit. "
           "With --predict, only the rows that would pass it are left unmeasured.",
           "max_seconds", 600.0, type=float, configurable=True, minimum=0),
    Option(("--predict",), "Probe a cost model first (one forward without cache and one cached step at a few "
           "lengths) and add its predicted times and speed-up beside the measured ones, with an explanation; "
           "rows too costly for --max-seconds are predicted only (measured=False).", "predict", action="store_true"),
)  # fmt: skip


def configurable() -> dict[str, Option]:
    """The options that are also ``KVMagics`` traits, by trait name."""
    return {o.dest: o for o in (*LOAD_OPTIONS, *BENCH_OPTIONS) if o.configurable}


def defaults() -> dict[str, Any]:
    """The built-in defaults of the configurable options: what the command uses."""
    return {name: option.default for name, option in configurable().items()}


def add_arguments(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, options: Sequence[Option], host: Host
) -> None:
    for option in options:
        if host in option.hosts:
            parser.add_argument(*option.spelling(host), **option.argparse_kwargs(host))


def resolved(args: argparse.Namespace, configured: Mapping[str, Any], name: str) -> Any:
    value = getattr(args, name)
    return configured[name] if value is None and name in configured else value


def load_kwargs(args: argparse.Namespace, configured: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of :func:`load_model` the parsed load options ask for."""
    kwargs = {o.dest: resolved(args, configured, o.dest) for o in LOAD_OPTIONS}
    kwargs["name"] = kwargs.pop("model")
    return kwargs


def benchmark_kwargs(args: argparse.Namespace, configured: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of :func:`run_benchmark` the parsed benchmark options ask for."""
    names = (
        "new_tokens", "prompt_tokens", "warmup_tokens", "repeat", "chat", "max_seconds", "predict", "ci_target",
        "auto_cap", "cache", "kv_bits", "compile", "profile",
    )  # fmt: skip
    return {name: resolved(args, configured, name) for name in names}


def prepare(args: argparse.Namespace) -> BenchmarkResult | None:
    """Check the output name and read the baseline before the benchmark, not after a long run."""
    from kvmagic.results.data import BenchmarkResult, export_format

    if args.save:
        export_format(args.save)
    if args.cache and (args.compare or getattr(args, "plot", False)):
        raise KVMagicError("--compare and --plot work on the two-condition run: drop them or drop --cache")
    if not args.compare:
        return None
    baseline = BenchmarkResult.read_json(args.compare)
    if not baseline.measurements:
        raise KVMagicError(f"{args.compare!r} holds no measured rows to compare with: save a finished run")
    return baseline


def finish(args: argparse.Namespace, result: BenchmarkResult, baseline: BenchmarkResult | None) -> Any:
    """Save the result if asked; return what to show: the result, or its comparison with the baseline."""
    if args.save:
        result.save(args.save)
    if baseline is None:
        return result
    from kvmagic.results.compare import compare

    return compare(result, baseline)
