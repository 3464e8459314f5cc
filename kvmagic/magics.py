"""``%kvload`` and ``%%kvbench``: parse, validate, call the API, return what it found."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from traitlets import Integer, TraitError, validate

from .errors import KVMagicError
from .loading import DEFAULT_MODEL, DTYPES

if TYPE_CHECKING:
    from .loading import LoadedModel

__all__ = ["KVMagics"]


def _whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        import argparse

        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def _parse(func: Any, line: str) -> Any:
    """Parse a magic's argument line; any mistake becomes a UsageError pointing at the help."""
    name = func.__name__
    try:
        return parse_argstring(func, line)
    except UsageError as error:
        raise UsageError(f"%{name}: {error} (see %{name}? for the options)") from None
    except ValueError as error:  # unbalanced quotes
        raise UsageError(f"%{name}: cannot split the arguments: {error}") from None


@magics_class
class KVMagics(Magics):
    """Load a causal LM once, then time its generation with the KV cache off and on."""

    new_tokens = Integer(64, help="Tokens each timed run generates (-n).").tag(config=True)
    warmup_tokens = Integer(4, help="Tokens each untimed warm-up run generates (-w).").tag(config=True)
    repeat = Integer(1, help="Interleaved uncached/cached pairs to time (-r).").tag(config=True)

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell=shell, **kwargs)
        self.loaded: LoadedModel | None = None

    @validate("new_tokens", "repeat")
    def _at_least_one(self, proposal: Any) -> int:
        if proposal["value"] < 1:
            raise TraitError(f"KVMagics.{proposal['trait'].name} must be >= 1, got {proposal['value']}")
        return proposal["value"]

    @validate("warmup_tokens")
    def _not_negative(self, proposal: Any) -> int:
        if proposal["value"] < 0:
            raise TraitError(f"KVMagics.warmup_tokens must be >= 0, got {proposal['value']}")
        return proposal["value"]

    @magic_arguments()
    @argument("model", nargs="?", default=DEFAULT_MODEL, help=f"Hub id, local directory, or 'tiny' (offline). Default: {DEFAULT_MODEL}.")
    @argument("--dtype", default="auto", help=f"One of {', '.join(DTYPES)}; auto is float16 on CUDA, float32 otherwise.")
    @argument("--device-map", default="auto", help="Passed to from_pretrained (default: auto).")
    @argument("--revision", help="Branch, tag or commit of a hub model.")
    @argument("--gguf-file", help="Load this GGUF file from the model's repository or directory.")
    @argument("--attn-implementation", help="e.g. eager, sdpa, flash_attention_2.")
    @argument("--trust-remote-code", action="store_true", help="Run model code shipped with the repository.")
    @line_magic
    def kvload(self, line: str) -> None:
        """Load a causal LM and its tokenizer for %%kvbench, and print a summary.

        Example::

            %kvload tiny
            %kvload LGAI-EXAONE/EXAONE-4.0-1.2B --dtype bfloat16
        """
        args = _parse(self.kvload, line)
        from .loading import load_model

        try:
            self.loaded = load_model(
                args.model,
                dtype=args.dtype,
                device_map=args.device_map,
                revision=args.revision,
                gguf_file=args.gguf_file,
                attn_implementation=args.attn_implementation,
                trust_remote_code=args.trust_remote_code,
                before_weights=self.unload,
            )
        except KVMagicError as error:
            raise UsageError(str(error)) from None
        print(self.loaded.summary())

    @magic_arguments()
    @argument("-n", "--new-tokens", type=_whole_number, help="Tokens to generate per timed run (default 64).")
    @argument("-w", "--warmup-tokens", type=_whole_number, help="Tokens per untimed warm-up run (default 4).")
    @argument("-r", "--repeat", type=_whole_number, help="Interleaved uncached/cached pairs; medians are reported (default 1).")
    @argument("--chat", action="store_true", help="Wrap the prompt in the tokenizer's chat template.")
    @argument("-o", "--output", action="store_true", help="Return the BenchmarkResult instead of a DataFrame.")
    @argument("-v", "--var", help="Also store the BenchmarkResult in this variable.")
    @argument("-q", "--quiet", action="store_true", help="Print and return nothing (unless -o).")
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
        speedup_ci_low/high: 95% bootstrap interval). Those extra figures come from one extra
        hooked run per condition after the timed ones; the headline times stay bare.

        Example::

            %%kvbench -n 64 -r 3
            The KV cache stores each token's keys and values so that
        """
        args = _parse(self.kvbench, line)
        if self.loaded is None:
            raise UsageError("no model loaded: run `%kvload MODEL` first (`%kvload tiny` works offline)")
        from .bench import run_benchmark

        try:
            result = run_benchmark(
                self.loaded,
                cell.strip(),
                new_tokens=self.new_tokens if args.new_tokens is None else args.new_tokens,
                warmup_tokens=self.warmup_tokens if args.warmup_tokens is None else args.warmup_tokens,
                repeat=self.repeat if args.repeat is None else args.repeat,
                chat=args.chat,
            )
        except KVMagicError as error:
            raise UsageError(str(error)) from None
        if args.var:
            self.shell.user_ns[args.var] = result
        if args.output:
            return result
        if args.quiet:
            return None
        for note in result.notes():
            print(note)
        return result.to_dataframe()

    def unload(self) -> None:
        """Drop the loaded model and free its memory."""
        if self.loaded is None:
            return
        from .loading import release_memory

        self.loaded = None
        release_memory()
