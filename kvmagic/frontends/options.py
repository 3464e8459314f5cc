"""The options of ``%kvload``/``%%kvbench`` and of the ``kvbench`` command, declared once as data.

The magics turn these into ``@argument`` decorators, the command into an argparse parser, and both
hand the parsed values to the same functions here on their way to :func:`load_model` and
:func:`run_benchmark`, so the two front ends cannot drift apart. An option with ``configurable``
set is also a trait of ``KVMagics`` (``%config KVMagics.new_tokens = 128``): its flag defaults to
None, and None means "the configured default".
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

from kvmagic.core.addon import addons, used_by
from kvmagic.core.deadline import CUT_MARGIN, FAR_PAST
from kvmagic.core.lengths import LENGTH_FORMS
from kvmagic.core.spec import BenchSpec, names
from kvmagic.core.strategy import BACKENDS, KNOWN
from kvmagic.errors import KVMagicError, did_you_mean
from kvmagic.frontends.option import Host, Option
from kvmagic.frontends.values import at_least_one, lengths, read_text, repeat_count, whole_number
from kvmagic.model.loading import DEFAULT_MODEL, DTYPES

__all__ = [
    "BENCH_OPTIONS",
    "CONFIGURABLE",
    "LOAD_OPTIONS",
    "Host",
    "Option",
    "add_arguments",
    "bench_spec",
    "check_before_loading",
    "defaults",
    "emptied",
    "flag",
    "load_kwargs",
    "meant",
    "resolved",
    "typed",
    "unrecognized",
    "word_optional",
]


def _default(name: str) -> Any:
    """The request's own default, so the front ends and the API cannot drift apart (one length as a number)."""
    value = getattr(BenchSpec(), name)
    return value[0] if isinstance(value, tuple) and len(value) == 1 else value


_LOAD_OPTIONS: tuple[Option, ...] = (
    Option(("model",), "Hub id, local directory, or 'tiny' (offline). kvbench -m (and %%%%kvbench -m) takes several, "
           "comma-separated: each measured in turn, side by side in one table.", "model", DEFAULT_MODEL,
           metavar="MODEL", configurable=True, cli_flags=("-m", "--model"), examples=("tiny",)),
    Option(("--dtype",), f"One of {', '.join(DTYPES)}; auto is float16 on CUDA, float32 otherwise.", "dtype", "auto",
           configurable=True, choices=DTYPES, examples=("float32", "bfloat16")),
    Option(("--device-map",), "Passed to from_pretrained.", "device_map", "auto", configurable=True,
           examples=("cpu",)),
    Option(("--revision",), "Branch, tag or commit of a hub model.", "revision", examples=("main",)),
    Option(("--gguf-file",), "Load this GGUF file from the model's repository or directory.", "gguf_file",
           examples=("model.gguf",)),
    Option(("--attn-implementation",), "e.g. eager, sdpa, flash_attention_2.", "attn_implementation",
           configurable=True, examples=("eager", "sdpa")),
    Option(("--trust-remote-code",), "Run model code shipped with the repository.", "trust_remote_code",
           action="store_true", examples=("",)),
)  # fmt: skip

_BENCH_OPTIONS: tuple[Option, ...] = (
    Option(("-n", "--new-tokens"), f"Tokens to generate per timed run; a sweep: {LENGTH_FORMS}.", "new_tokens",
           _default("new_tokens"), type=lengths, configurable=True, examples=("2", "2,3")),
    Option(("-p", "--prompt-tokens"), "Stretch (or cut) the prompt to this many tokens by repeating its own tokens; "
           "lengths as for -n.", "prompt_tokens", type=lengths, examples=("8", "4,8")),
    Option(("-b", "--batch"), "Sequences per generate, the prompt's ids in every one (each must generate the same "
           "tokens); lengths as for -n. tok/s, the KV cache and peak memory are the whole batch's.", "batch",
           _default("batch"), type=lengths, examples=("2",)),
    Option(("-w", "--warmup-tokens"), "Tokens per untimed warm-up run.", "warmup_tokens",
           _default("warmup_tokens"), type=whole_number, configurable=True, examples=("1",)),
    Option(("-r", "--repeat"), "Interleaved uncached/cached pairs; medians are reported. auto: take pairs (at least 5) "
           "until the 95-percent interval of the speed-up is within --ci-target of it, or --auto-cap seconds pass.",
           "repeat",
           _default("repeat"), type=repeat_count, configurable=True, words=("auto",), examples=("auto", "3")),
    Option(("--ci-target",), "With -r auto: the interval's half-width to reach, as a fraction of the speed-up.",
           "ci_target", _default("ci_target"), type=float, configurable=True, examples=("0.5",)),
    Option(("--auto-cap",), "With -r auto: stop taking pairs for a configuration after this many seconds.",
           "auto_cap", _default("auto_cap"), type=float, configurable=True, examples=("1",)),
    Option(("--chat",), "Wrap the prompt in the tokenizer's chat template (--no-chat: do not).", "chat",
           _default("chat"), action=argparse.BooleanOptionalAction, configurable=True, examples=("",)),
    Option(("--steps",), "After the timed runs, one hooked run per strategy times every step (result.steps(), "
           "the plot's per-step panel) and keeps the top-2 margins (--no-steps: not; --plot turns it on).",
           "steps", _default("steps"), action=argparse.BooleanOptionalAction,
           configurable=True, examples=("",)),
    Option(("--expand",), "Replace {name} and {name.attr} in the cell with values from the notebook; {{ and }} "
           "stay literal braces (--no-expand: keep the text as written).", "expand", False,
           action=argparse.BooleanOptionalAction, configurable=True, hosts=("magic",), examples=("",),
           instead="it takes the prompt as written"),
    Option(("-o", "--output"), "Return the BenchmarkResult (with --compare, the Comparison holding it) instead of a "
           "table.", "output", action="store_true", hosts=("magic",), examples=("",),
           instead="it prints the result, and --format json gives all of it"),
    Option(("-v", "--var"), "Also store the BenchmarkResult in this variable.", "var", hosts=("magic",),
           examples=("pair_result",), instead="keep the result with --save PATH.json"),
    Option(("-q", "--quiet"), "Print nothing and show no progress bar (in a notebook, return nothing unless -o or "
           "--plot).", "quiet", action="store_true", examples=("",)),
    Option(("--wide",), "Show every column, not only those a reader needs first (lengths, both times, the speed-up "
           "and its interval, identical, KV cache size); the data keeps every column either way (--no-wide: the "
           "short table).", "wide", False, action=argparse.BooleanOptionalAction, configurable=True, examples=("",)),
    Option(("--save",), "Also write the result to PATH: .csv, .json (everything, loadable with "
           "BenchmarkResult.read_json and --compare), .md, or .html (one page to send: table, figures, verdict, notes "
           "and the command that reruns it).", "save", metavar="PATH",
           examples=("pair.json", "pair.md")),
    Option(("--threads",), "torch's CPU threads for this run, put back afterwards (default: torch's own); "
           "on a shared machine, 1 steadies the timings.", "threads", type=at_least_one, configurable=True,
           examples=("1",)),
    Option(("--cache",), f"Compare KV-cache strategies instead, one row each against off: {', '.join(KNOWN)}, "
           "press:METHOD:RATIO (a kvpress method dropping that share of the prompt's positions, e.g. "
           "press:snapkv:0.5; a sweep press:snapkv:0.25-0.75+0.25), or any other cache_implementation the "
           "installed transformers has; comma-separated.", "cache", metavar="LIST",
           examples=("off,dynamic,static", "dynamic,quantized:fp8")),
    Option(("--quality",), "With --cache, after the timed runs: one untimed run per strategy, teacher-forced along "
           "the full cache's (dynamic's) greedy tokens, sets its next-token distributions against the full "
           "cache's: top1_agreement, kl_nats, ppl_ratio (--no-quality: not).", "quality", _default("quality"),
           action=argparse.BooleanOptionalAction, configurable=True, examples=("",)),
    Option(("--quality-text",), "With --cache: judge quality along the text in FILE, forced after the prompt, "
           "instead of the full cache's greedy tokens.", "quality_text", metavar="FILE",
           examples=("continuation.txt",)),
    Option(("--kv-bits",), "Bits per value of a " + " or ".join(
           f"quantized:{b.name} ({', '.join(map(str, b.widths))})" for b in BACKENDS.values() if b.widths) + " cache.",
           "kv_bits", type=whole_number, examples=("4",)),
    Option(("--compile",), "With --cache, add static+compile: the static cache under torch.compile (where "
           "transformers compiles generate; the compile is paid by an untimed run).", "compile", action="store_true",
           examples=("",)),
    Option(("--max-seconds",), "A deadline in seconds (0: none): the shortest configurations first, each started "
           "only where the runs made project it to fit, the rest left out and named; a run still going "
           f"{CUT_MARGIN * 100:.0f}%% past it is cut. Refused up front only past {FAR_PAST:g} times it.",
           "max_seconds", _default("max_seconds"), type=float, configurable=True, examples=("5", "0")),
)  # fmt: skip


# The centre's options, then each add-on's.
LOAD_OPTIONS = (*_LOAD_OPTIONS, *(option for addon in addons() for option in addon.load_options))
BENCH_OPTIONS = (*_BENCH_OPTIONS, *(option for addon in addons() for option in addon.options))
# The options that are also ``KVMagics`` traits, by trait name.
CONFIGURABLE = {o.dest: o for o in (*LOAD_OPTIONS, *BENCH_OPTIONS) if o.configurable}


def defaults() -> dict[str, Any]:
    """The built-in defaults of the configurable options: what the command uses."""
    return {name: option.default for name, option in CONFIGURABLE.items()}


def add_arguments(parser: argparse._ActionsContainer, options: Sequence[Option], host: Host) -> None:
    for option in options:
        if host in option.hosts:
            parser.add_argument(*option.spelling(host), **option.argparse_kwargs(host))


def flag(name: str, host: Host) -> str:
    """How ``host`` spells the option of parameter ``name`` (with its value's name): what its errors say."""
    for option in (*LOAD_OPTIONS, *BENCH_OPTIONS):
        if option.dest == name:
            spelled = option.spelling(host)[0]
            return f"{spelled} {option.metavar}" if option.metavar == "PATH" else spelled
    return name


def word_optional(host: Host) -> dict[str, tuple[str, ...]]:
    """The flags whose word may be left out, as ``host`` spells them, each with the words it takes."""
    return {flag: o.words for o in BENCH_OPTIONS if o.nargs == "?" and host in o.hosts for flag in o.spelling(host)}


def check_before_loading(spec: BenchSpec, prompt: str) -> None:
    """Refuse what the request and the prompt alone show, before any model loads (a typo then costs no load):
    a strategy this transformers or kvpress does not know, what an add-on cannot take of the prompt."""
    from kvmagic.measure.strategies import checked

    if spec.cache is not None:
        checked(spec.cache)
    for addon in used_by(spec):
        addon.check_prompt(spec, prompt)


def unrecognized(message: str) -> list[str]:
    """The words argparse's ``message`` calls unrecognized, each without its ``=value``; none for another message."""
    if not message.startswith("unrecognized arguments:"):
        return []
    return [word.partition("=")[0] for word in message.removeprefix("unrecognized arguments:").split()]


def emptied(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str:
    """The flag whose one value came back as an empty list, where the value was ``--`` (``--save=--``): Python
    3.11's argparse takes it for the end of the options; empty when none did."""
    for action in parser._actions:
        if action.option_strings and action.nargs in (None, "?") and getattr(args, action.dest, None) == []:
            return action.option_strings[-1]
    return ""


def meant(message: str, parser: argparse.ArgumentParser) -> str:
    """The flag of ``parser`` that a word argparse's ``message`` calls unrecognized was likely meant to be
    (``--repeat`` for ``--repat``), as "did you mean ...?"; empty when it names none close to one."""
    flags = [flag for action in parser._actions for flag in action.option_strings if flag.startswith("--")]
    close = (did_you_mean(word, flags, cutoff=0.8) for word in unrecognized(message) if word.startswith("--"))
    return next((said for said in close if said), "")


def resolved(args: argparse.Namespace, configured: Mapping[str, Any], name: str) -> Any:
    value = getattr(args, name)
    return configured[name] if value is None and name in configured else value


def load_kwargs(args: argparse.Namespace, configured: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of :func:`load_model` the parsed load options ask for."""
    kwargs = {o.dest: resolved(args, configured, o.dest) for o in LOAD_OPTIONS}
    kwargs["name"] = kwargs.pop("model")
    return kwargs


def typed(parser: argparse.ArgumentParser, words: Sequence[str]) -> frozenset[str]:
    """The options ``words`` give ``parser`` a value, by name: one typed at its default's value among them, which the
    parsed values alone cannot tell from one not typed."""
    unset = object()
    kinds = (argparse._AppendAction, argparse._CountAction)
    probe = argparse.Namespace(**{
        action.dest: unset
        for action in parser._actions
        if action.option_strings and action.dest != argparse.SUPPRESS and not isinstance(action, kinds)
    })  # fmt: skip
    parser.parse_known_args(list(words), probe)
    return frozenset(name for name, value in vars(probe).items() if value is not unset and value is not None)


def bench_spec(
    args: argparse.Namespace, configured: Mapping[str, Any], fields: Mapping[str, Any] | None = None
) -> BenchSpec:
    """The request the parsed benchmark options (and the configured defaults) ask for, with ``fields`` as given (a
    saved request's that no option holds as the file does), with what a flag given turns on (``Option.turns_on``)."""
    values = {name: resolved(args, configured, name) for name in names() if name in vars(args)}
    for name in ("ci_target", "auto_cap"):  # given here, not configured: a target of -r auto without it
        if getattr(args, name, None) is not None and values.get("repeat") != "auto":
            raise KVMagicError(f"{{{name}}} is for {{repeat}} auto: add {{repeat}} auto, or drop it", name, "repeat")
    for option in BENCH_OPTIONS:
        if option.turns_on and getattr(args, option.dest, None):
            values.update(dict.fromkeys(option.turns_on, True))
    path, fields = values.get("quality_text"), fields or {}
    if path is not None and "quality_text" not in fields:
        values["quality_text"] = read_text(path, "the text of {quality_text}", "quality_text")
        if not values["quality_text"].strip():
            raise KVMagicError(f"{{quality_text}} {path} is empty: give it a file holding the text to judge along",
                               "quality_text")  # fmt: skip
    return BenchSpec.of(**{**values, **fields})
