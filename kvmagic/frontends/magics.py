"""``%kvload`` and ``%%kvbench``: parse, validate, call the API, return what it found."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from traitlets import Bool, Enum, Float, Integer, TraitError, TraitType, Unicode, Union, validate

from kvmagic.errors import KVMagicError, one_line
from kvmagic.frontends.options import (
    BENCH_OPTIONS,
    LOAD_OPTIONS,
    Option,
    bench_spec,
    configurable,
    finish,
    flag,
    load_kwargs,
    prepare,
    resolved,
)
from kvmagic.frontends.values import at_least_one, whole_number
from kvmagic.frontends.variables import check_name, store
from kvmagic.measure.guards import forget_frames, forget_last_failure

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from matplotlib.figure import Figure

    from kvmagic.model.loading import LoadedModel

__all__ = ["KVMagics"]

_CONFIGURABLE = configurable()
_TRAITS = {bool: Bool, int: Integer, float: Float, str: Unicode}


def _trait(name: str) -> TraitType:
    """A configurable default of ``KVMagics``, declared from the option it fills in."""
    option = _CONFIGURABLE[name]
    if option.default is not None:
        kind = _TRAITS[type(option.default)]
    else:  # no default of its own (torch's threads): the kind its parser reads
        kind = Integer if option.type in (whole_number, at_least_one) else Unicode
    described = f"{option.help} ({'/'.join(option.flags)})"
    if option.words:  # a number or one of these words: -r 3 or -r auto
        return Union([kind(), Enum(option.words)], default_value=option.default, help=described).tag(config=True)
    return kind(option.default, allow_none=option.default is None, help=described).tag(config=True)


def _with_options(options: Sequence[Option]) -> Callable[[Any], Any]:
    """``@magic_arguments`` plus one ``@argument`` per option, in the order declared."""

    def decorate(func: Any) -> Any:
        for option in reversed(options):
            if "magic" in option.hosts:
                func = argument(*option.spelling("magic"), **option.argparse_kwargs("magic"))(func)
        return magic_arguments()(func)

    return decorate


def _show(figure: Figure) -> None:
    """Show a figure inline as PNG, whatever matplotlib backend the kernel has (or none)."""
    import io

    from IPython.display import display

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    text = "<figure: in a terminal, save it with `result.plot().savefig('sweep.png')` on a result from -o or -v>"
    display({"image/png": buffer.getvalue(), "text/plain": text}, raw=True)


def _usage_error(error: KVMagicError) -> UsageError:
    """The one line a notebook shows, options named as its flags; the frames behind it are cleared so
    they cannot pin a model."""
    forget_frames(error)
    return UsageError(one_line(error.spelled(lambda name: flag(name, "magic"))))


def _parse(func: Any, line: str) -> Any:
    """Parse a magic's argument line; any mistake becomes a UsageError pointing at the help."""
    name = func.__name__
    try:
        return parse_argstring(func, line)
    except UsageError as error:
        raise UsageError(f"%{name}: {one_line(str(error))} (see %{name}? for the options)") from None
    except ValueError as error:  # unbalanced quotes
        raise UsageError(f"%{name}: cannot split the arguments: {error}") from None


@magics_class
class KVMagics(Magics):
    """Load a causal LM once, then time its generation with the KV cache off and on."""

    # One trait per configurable option of the table (``%config KVMagics.new_tokens = 128``); a class
    # body's namespace is a real dict, so the table declares them rather than a hand-kept list.
    locals().update({name: _trait(name) for name in _CONFIGURABLE})

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell=shell, **kwargs)
        self.loaded: LoadedModel | None = None

    @validate(*_CONFIGURABLE)
    def _check_default(self, proposal: Any) -> Any:
        try:
            _CONFIGURABLE[proposal["trait"].name].check(proposal["value"])
        except KVMagicError as error:
            raise TraitError(error.spelled(lambda name: f"KVMagics.{name}")) from None
        return proposal["value"]

    def _configured(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _CONFIGURABLE}

    @_with_options(LOAD_OPTIONS)
    @line_magic
    def kvload(self, line: str) -> None:
        """Load a causal LM and its tokenizer for %%kvbench, and print a summary.

        Example::

            %kvload tiny
            %kvload LGAI-EXAONE/EXAONE-4.0-1.2B --dtype bfloat16
        """
        args = _parse(self.kvload, line)
        from kvmagic.model.loading import load_model

        # The name only: holding the old model here would keep it in memory while the new weights load.
        previous = self.loaded.name if self.loaded is not None else None
        try:
            self.loaded = load_model(**load_kwargs(args, self._configured()), before_weights=self.unload)
        except KVMagicError as error:
            usage = _usage_error(error)
            if previous is not None and self.loaded is None:  # it failed after the old model was released
                usage = UsageError(
                    f"{usage}; the previously loaded model ({previous!r}) was released: run %kvload again"
                )
            raise usage from None
        print(self.loaded.summary())

    @_with_options(BENCH_OPTIONS)
    @cell_magic
    def kvbench(self, line: str, cell: str) -> Any:
        """Time greedy generation of the cell's text with the KV cache off and on.

        The whole cell body is the prompt. kvmagic tokenizes it once, warms up, then times
        `generate` with use_cache=False and use_cache=True (device-synchronized) and returns a
        DataFrame: prompt_tokens, new_tokens, uncached_s, cached_s, speedup, identical; then
        time to first token and decode tokens/s per condition (*_ttft_s, *_tok_s), the KV cache
        counted from the returned cache and predicted from the config (kv_cache_mib,
        kv_predicted_mib), peak memory per condition (*_peak_mib: CUDA allocator peak on CUDA,
        process peak RSS otherwise), and with -r 3 or more the spread (*_min_s, *_iqr_s,
        speedup_ci_low/high: a 95% interval of the speed-up from the per-pair speed-ups, checked by
        simulation). Those figures come from the runs made anyway, read outside the timed region, and
        a one-token run per condition; --steps (and --plot) add one hooked run per condition for
        per-step times (result.steps()). A single configuration is estimated from two-token runs and
        refused past --max-seconds like a sweep; a long run shows a progress bar with its ETA.

        The table shows the columns a reader needs first, to fit a 100-column terminal: prompt_tokens,
        new_tokens, uncached_s, cached_s, speedup (with its interval, where there is one, as
        "3.47 [3.10, 3.90]"), identical and kv_cache_mib; the DataFrame holds every column. --wide (or
        %config KVMagics.wide = True) shows them all. -v NAME must be a Python variable name; if NAME
        held something other than an earlier result, or is a builtin, a note says what it replaced.

        -n and -p take lists and ranges (16,64,256; 16-256*4; 32-128+32): the benchmark then sweeps
        their cross product, one row each, with a progress bar. Ctrl-C stops a sweep and returns the
        rows finished so far, marked partial. --compare PATH.json adds, per row, the change in
        speed-up against a run saved with --save and whether it exceeds both runs' spread.
        --expand fills {name} fields from the notebook (nothing is evaluated). Defaults are
        settings: %config KVMagics.new_tokens = 128.

        --predict first probes a cost model (one forward without cache, F(L), and one cached decode
        step, D(L), at a few lengths) and adds predicted_uncached_s, predicted_cached_s and
        predicted_speedup beside the measured columns, with notes on why: the fitted curves, where
        the cache breaks even, which per-step cost dominates, KV bytes against weight bytes. Rows
        that would pass --max-seconds are then predicted only (measured=False). -r auto takes
        interleaved pairs until an anytime 95% interval of the speed-up (one that holds whenever the
        loop stops, from 10 pairs) is within --ci-target (0.05: ±5%) of it, or --auto-cap seconds pass
        for that row (from 5 pairs), and says how many it took.

        -b 1,2,4 repeats the prompt across a batch (every sequence must generate the same tokens);
        --limits sets each row against the bound the device's bandwidth and throughput allow;
        --frontier predicts each strategy's longest context and largest batch in the memory free
        (--frontier check also runs one cached generate at that length); --threads N sets torch's
        CPU threads for the run.

        --cache off,dynamic,static,quantized:fp8 compares KV-cache strategies instead (off is always
        measured: it is the reference). Each is warmed up (at least one token, so a backend's first-use
        build or a compile never lands in a timed run), then all are timed interleaved. The table has
        one row per (prompt_tokens, new_tokens, strategy): seconds (median), tok_s (decode tokens/s),
        speedup (against off), identical (against off's first run), first_mismatch ("position: token
        vs token"), kv_cache_mib (counted from the returned cache), peak_mib, compile_s (first call's
        extra seconds with --compile) and note: why a strategy could not run here (a missing package
        and its pip extra, no GPU, a spelling the installed transformers lacks). --kv-bits sets the
        width of quantized:quanto/hqq; --compile adds static+compile. Shown by default: the sizes,
        strategy, seconds, tok_s, speedup, identical, kv_cache_mib, peak_mib, and a note column whose
        marks ([1]) point to footnotes under the table: where tokens first differed, why a strategy
        could not run.

        Examples::

            %%kvbench -n 64 -r 3
            The KV cache stores each token's keys and values so that

            %%kvbench -n 16,64,256 -p 16-256*4 --plot --save sweep.json
            The KV cache stores each token's keys and values so that

            %%kvbench -r 5 --compare sweep.json --expand
            {prompt}

            %%kvbench -n 16,64,1024 -r auto --predict --max-seconds 60
            The KV cache stores each token's keys and values so that

            %%kvbench -n 64,256 -r 3 --cache off,dynamic,static,quantized:quanto --kv-bits 4
            The KV cache stores each token's keys and values so that
        """
        args = _parse(self.kvbench, line)
        if self.loaded is None:
            raise UsageError("no model loaded: run `%kvload MODEL` first (`%kvload tiny` works offline)")
        from kvmagic.frontends.expand import expand
        from kvmagic.runner.runner import run_benchmark

        forget_last_failure()  # an interrupted run's tensors would otherwise share the memory with this one
        configured = self._configured()
        namespace: dict[str, Any] = self.shell.user_ns if self.shell is not None else {}
        try:
            check_name(args.var)
            prompt = expand(cell, namespace) if resolved(args, configured, "expand") else cell
            baseline = prepare(args)
            spec = bench_spec(args, configured)
            result = run_benchmark(self.loaded, prompt.strip(), spec, progress=not args.quiet)
            replaced = store(namespace, args.var, result) if args.var is not None else None
            shown = finish(args, result, baseline)
        except KVMagicError as error:
            raise _usage_error(error) from None
        if args.plot and result.measurements:
            _show(result.plot())
        if replaced and not args.quiet:
            print(replaced)
        if args.output:
            return shown
        if args.quiet:
            return None
        from kvmagic.results.shown import wrapped_notes

        for line in wrapped_notes(shown.notes()):
            print(line)
        from kvmagic.results.display import styled_table

        metadata = {"model": result.model, **result.metadata}
        return styled_table(shown.to_dataframe(), metadata, wide=resolved(args, configured, "wide"))

    def unload(self) -> None:
        """Drop the loaded model and free its memory."""
        if self.loaded is None:
            return
        from kvmagic.measure.accelerator import release_memory

        self.loaded = None
        forget_last_failure()
        release_memory()
