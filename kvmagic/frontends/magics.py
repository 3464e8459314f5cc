"""``%kvload`` and ``%%kvbench``: parse, validate, call the API, return what it found.

A magic's argument line and cell body are read as the user typed them: the words, the options, the prompt.
Every mistake in them is one ``UsageError`` that says the fix; the one-line form's prompt may go unquoted
(``%kvbench -n 8 The KV cache``), so a prompt holding a word like ``-r`` is named when quoting it would fix
the line.
"""

from __future__ import annotations

import functools
import inspect
import re
import shlex
import sys
import textwrap
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments
from traitlets import Bool, Enum, Float, Integer, TraitError, TraitType, Unicode, Union, validate

from kvmagic.core.addon import addons
from kvmagic.errors import KVMagicError, one_line
from kvmagic.frontends.around import finish, read_ahead, saved_request, taker
from kvmagic.frontends.helppage import fitted, magic_page
from kvmagic.frontends.options import (
    BENCH_OPTIONS,
    CONFIGURABLE,
    LOAD_OPTIONS,
    Option,
    bench_spec,
    check_before_loading,
    emptied,
    flag,
    load_kwargs,
    meant,
    resolved,
    typed,
    unrecognized,
    word_optional,
)
from kvmagic.frontends.values import at_least_one, prompt_apart, whole_number
from kvmagic.frontends.variables import check_name, store
from kvmagic.measure.guards import forget_frames, forget_last_failure

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from kvmagic.core.addon import AddOn
    from kvmagic.core.spec import BenchSpec
    from kvmagic.measure.loaded import LoadedModel

__all__ = ["Interrupted", "KVMagics", "cell_prompt", "line_words", "parse_line", "split_line"]

# The command's own flags, which %%kvbench lacks: what a notebook does instead, asked when said.
_COMMAND_ONLY: dict[str, Callable[[], str]] = {
    **{option.flags[0]: option.offered for option in BENCH_OPTIONS if "magic" not in option.hosts and option.instead},
    "--format": lambda: "in a notebook, -o returns the result: .to_csv(), .to_markdown() or .to_json()",
    "--prompt-file": lambda: "in a notebook, the cell's body is the prompt",
}
_TRAITS = {bool: Bool, int: Integer, float: Float, str: Unicode}


def _trait(option: Option) -> TraitType[Any, Any]:
    """A configurable default of ``KVMagics``, declared from the option it fills in."""
    if option.default is not None:
        kind = _TRAITS[type(option.default)]
    else:  # no default of its own (torch's threads): the kind its parser reads
        kind = Integer if option.type in (whole_number, at_least_one) else Unicode
    described = f"{option.help.replace('%%', '%')} ({'/'.join(option.flags)})"  # argparse's escaping undone
    if option.words:  # a number or one of these words: -r 3 or -r auto
        either: TraitType[Any, Any] = Union([kind(), Enum(option.words)], default_value=option.default, help=described)
        return either.tag(config=True)
    trait: TraitType[Any, Any] = kind(option.default, allow_none=option.default is None, help=described)
    return trait.tag(config=True)


def _with_options(options: Sequence[Option], usage: str) -> Callable[[Any], Any]:
    """``@magic_arguments`` plus one ``@argument`` per option, in the order declared; the help page
    (:func:`magic_page`) from ``usage`` (``%(prog)s`` is the magic's name) and the docstring, which is what the
    magic does, then ``Examples:``."""

    def decorate(func: Any) -> Any:
        about, _, examples = inspect.cleandoc(func.__doc__).partition("\nExamples:\n")
        for option in reversed(options):
            if "magic" in option.hosts:
                func = argument(*option.spelling("magic"), **option.argparse_kwargs("magic"))(func)
        func = magic_arguments()(func)
        func.__doc__ = magic_page(f"%{func.__name__}", usage, about, textwrap.dedent(examples), tuple(options))
        return func

    return decorate


# Both ways to write a benchmark, as the user types them.
_BENCH_USAGE = (
    "%(prog)s [options] PROMPT    the prompt on the line\n"
    "       %%%(prog)s [options]          the prompt as the cell's body"
)
_PROMPT_HELP = "The prompt, in the one-line form (%%kvbench); in a %%%%kvbench cell the body is the prompt."

_ARGUMENT = re.compile(r"^argument (-[^/:\s]+)[^:]*:")  # argparse's "argument -n/--new-tokens:" as "-n:"


def split_line(line: str) -> list[str]:
    """The words of an argument line as a shell splits them, quotes removed (IPython's own splitter keeps
    them: ``--save "a b.json"`` would name a file with quotes in it); a backslash stays a backslash."""
    lexer = shlex.shlex(line, posix=True)
    lexer.whitespace_split, lexer.commenters, lexer.escape = True, "", ""
    return list(lexer)


def line_words(func: Any, line: str, *, prompt_last: bool = False) -> list[str]:
    """The words of a magic's argument line as its parser reads them (``prompt_last``: the one-line form's prompt
    set apart after the options)."""
    try:
        words = split_line(line)
    except ValueError as error:  # unbalanced quotes
        name = func.__name__
        raise UsageError(f"%{name}: cannot split the arguments: {error}: quote the prompt, or use a cell") from None
    return prompt_apart(words, word_optional("magic"), one_word=False) if prompt_last else words


def parse_line(func: Any, line: str, *, prompt_last: bool = False) -> Any:
    """Parse a magic's argument line (``prompt_last``: the one-line form, its prompt after the options); any
    mistake becomes a UsageError pointing at the help."""
    name = func.__name__
    words = line_words(func, line, prompt_last=prompt_last)
    try:
        args = func.parser.parse_args(words)
    except UsageError as error:
        said = _ARGUMENT.sub(r"\1:", one_line(str(error)))
        quoted = _quoted(func.parser, words) if prompt_last else None
        command = next((flag for flag in _COMMAND_ONLY if flag in unrecognized(str(error))), None)
        if command is not None:
            message = f"%{name}: {command} is the command's (kvbench), not %{name}'s: {_COMMAND_ONLY[command]()}"
        else:
            fix = (
                f"a prompt holding a flag must be quoted: %{name} {quoted}"
                if quoted
                else f"{meant(str(error), func.parser)}see %{name}? for the options"
            )
            message = f"%{name}: {said} ({fix})"
        raise UsageError(message) from None
    if emptied(func.parser, args):
        raise UsageError(f"%{name}: {emptied(func.parser, args)} needs a value, and -- is none: give it one")
    return args


def _quoted(parser: Any, words: Sequence[str]) -> str | None:
    """The line with its prompt quoted, where the prompt holds a word argparse took for a flag and quoting
    it is all the line needs (``-n 8 Explain what -r does``); None otherwise."""
    for start in range(1, len(words)):
        if words[start].startswith("-") or words[start] == "--":
            continue
        prompt = " ".join(words[start:])
        try:
            parser.parse_args([*words[:start], "--", prompt])
        except UsageError:
            continue
        return shlex.join([*words[:start], prompt])
    return None


def cell_prompt(words: Sequence[str], cell: str | None) -> str:
    """The prompt: the cell's body, or the words after the options of the one-line form."""
    if cell is None:
        if not words:
            raise UsageError('%kvbench needs a prompt: %kvbench -n 16 "The KV cache", or a %%kvbench cell')
        return " ".join(words)
    if words:
        raise UsageError(
            f"%%kvbench takes its prompt from the cell's body: move {' '.join(words)!r} into it, or use %kvbench"
        )
    if not cell.strip():
        raise UsageError("the prompt is empty: write the text to generate from (in %%kvbench, the cell body)")
    return cell


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a run with nothing finished to show. It is still an interrupt (a notebook's "run all"
    stops there), but IPython shows it as its one line: the frames of torch where the signal landed are no
    mistake of the user's to read."""

    def _render_traceback_(self) -> list[str]:
        return [f"KeyboardInterrupt: {self}"]


def _worded(magic: Callable[..., Any]) -> Callable[..., Any]:
    """The magic, its every UsageError wrapped to fit a 100-column terminal after IPython's "UsageError: ", and
    Ctrl-C shown as one line that says what is left (a sweep keeps the rows it finished: no interrupt here)."""

    @functools.wraps(magic)
    def run(self: Any, *args: Any) -> Any:
        try:
            return magic(self, *args)
        except UsageError as error:
            raise UsageError(fitted(str(error), "UsageError: ")) from None
        except KeyboardInterrupt as interrupt:
            forget_frames(interrupt)  # the frames where the signal landed hold the run's tensors
            left = "no model is loaded" if self.loaded is None else f"{self.loaded.name!r} is still loaded"
            what = {"kvbench": " before a configuration finished: nothing to show", "kvload": f": {left}"}
            raise Interrupted(f"%{magic.__name__} stopped{what[magic.__name__]}") from None

    return run


def _usage_error(error: KVMagicError) -> UsageError:
    """The one line a notebook shows, options named as its flags; the frames behind it are cleared so
    they cannot pin a model."""
    forget_frames(error)
    return UsageError(one_line(error.spelled(lambda name: flag(name, "magic"))))


@magics_class
class KVMagics(Magics):
    """Load a causal LM once, then time its generation with the KV cache off and on."""

    # One trait per configurable option of the table (``%config KVMagics.new_tokens = 128``), each declared by name
    # so that editors and type checkers see it; tests/test_config.py fails on an option without its trait.
    model = _trait(CONFIGURABLE["model"])
    dtype = _trait(CONFIGURABLE["dtype"])
    device_map = _trait(CONFIGURABLE["device_map"])
    attn_implementation = _trait(CONFIGURABLE["attn_implementation"])
    new_tokens = _trait(CONFIGURABLE["new_tokens"])
    warmup_tokens = _trait(CONFIGURABLE["warmup_tokens"])
    repeat = _trait(CONFIGURABLE["repeat"])
    ci_target = _trait(CONFIGURABLE["ci_target"])
    auto_cap = _trait(CONFIGURABLE["auto_cap"])
    chat = _trait(CONFIGURABLE["chat"])
    steps = _trait(CONFIGURABLE["steps"])
    expand = _trait(CONFIGURABLE["expand"])
    wide = _trait(CONFIGURABLE["wide"])
    threads = _trait(CONFIGURABLE["threads"])
    quality = _trait(CONFIGURABLE["quality"])
    max_seconds = _trait(CONFIGURABLE["max_seconds"])

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell=shell, **kwargs)
        self.loaded: LoadedModel | None = None
        self.loaded_with: dict[str, Any] = {}  # the load_model keywords of the model loaded: what an add-on reloads

    @validate(*CONFIGURABLE)
    def _check_default(self, proposal: Any) -> Any:
        try:
            CONFIGURABLE[proposal["trait"].name].check(proposal["value"])
        except KVMagicError as error:
            raise TraitError(error.spelled(lambda name: f"KVMagics.{name}")) from None
        return proposal["value"]

    def _configured(self) -> dict[str, Any]:
        return {name: self.trait_values()[name] for name in CONFIGURABLE}

    @_with_options(LOAD_OPTIONS, "%(prog)s [MODEL] [options]")
    @line_magic
    @_worded
    def kvload(self, line: str) -> None:
        """Load a causal LM and its tokenizer for %%kvbench, and print a one-line summary. MODEL is a Hugging
        Face Hub id, a local directory saved with save_pretrained, or tiny (built in, works offline); without
        the Hub, a model comes from the local cache. Loading another model releases the one loaded before.

        Examples:
            %kvload tiny
            %kvload LGAI-EXAONE/EXAONE-4.0-1.2B --dtype bfloat16
        """
        args = parse_line(self.kvload, line)
        from kvmagic.model.loading import load_model

        # The name only: holding the old model here would keep it in memory while the new weights load.
        previous = self.loaded.name if self.loaded is not None else None
        try:
            kwargs = load_kwargs(args, self._configured())
            for addon in addons():
                addon.refuse_load(kwargs)
            self.loaded = load_model(**kwargs, before_weights=self.unload)
            self.loaded_with = kwargs
        except KVMagicError as error:
            usage = _usage_error(error)
            if previous is not None and self.loaded is None:  # it failed after the old model was released
                said = str(usage).removesuffix(".")  # a library's sentence quoted at its end: no ".;"
                released = f"the previously loaded model ({previous!r}) was released: run %kvload again"
                usage = UsageError(f"{said}; {released}")
            raise usage from None
        print(fitted(self.loaded.summary(), ""))  # a random model's runs past 100 columns

    @_with_options(BENCH_OPTIONS, _BENCH_USAGE)
    @argument("prompt", nargs="*", metavar="PROMPT", help=_PROMPT_HELP)  # type: ignore[untyped-decorator]
    @line_cell_magic
    @_worded
    def kvbench(self, line: str, cell: str | None = None) -> Any:
        """Time greedy generation of a prompt with the KV cache off and on, and check that both generate the
        same tokens. The prompt is the cell's whole body, or the rest of the line (quote it if it has spaces).

        The cell's value is a table, one row per configuration: the prompt's and the new tokens, the median
        times without and with the cache, the speed-up (with -r 3 or more, its 95% interval), whether the tokens
        were identical and the KV cache's size, with notes beneath. It is a pandas DataFrame holding every
        column; its .result is everything measured (the BenchmarkResult), and its .plot() draws time and speed-up
        against length. Defaults are settings: %config KVMagics.new_tokens = 128.

        Examples:
            %kvbench -n 16 "The KV cache stores each token's keys and values so that"

            %%kvbench -n 64 -r 3
            The KV cache stores each token's keys and values so that

            %%kvbench -n 16,64,256 -p 16-256*4 --plot --save sweep.json
            The KV cache stores each token's keys and values so that

            %%kvbench -n 64,256 -r 3 --cache off,dynamic,static,quantized:quanto --kv-bits 4
            The KV cache stores each token's keys and values so that

            %%kvbench -m tiny,google/gemma-3-270m --random-weights -n 8 -p 32,128
            The KV cache stores each token's keys and values so that
        """
        args = parse_line(self.kvbench, line, prompt_last=cell is None)
        given = typed(self.kvbench.parser, line_words(self.kvbench, line, prompt_last=cell is None))
        configured = self._configured()
        try:
            typed_prompt = (" ".join(args.prompt) or None) if cell is None else cell
            saved = saved_request(args, given, "magic", lambda: typed_prompt)
            cell = cell_prompt(args.prompt, cell) if saved is None else saved.prompt
            taken = taker(args, configured, "magic")
        except KVMagicError as error:
            raise _usage_error(error) from None
        if self.loaded is None and taken is None:
            raise UsageError("no model loaded: run `%kvload MODEL` first (`%kvload tiny` works offline)")
        from kvmagic.frontends.expand import expand

        forget_last_failure()  # an interrupted run's tensors would otherwise share the memory with this one
        namespace: dict[str, Any] = self.shell.user_ns if self.shell is not None else {}
        try:
            check_name(args.var)
            prompt = expand(cell, namespace) if resolved(args, configured, "expand") and saved is None else cell
            ahead = read_ahead(args, saved)
            spec = bench_spec(args, configured, saved.fields if saved is not None else None)
            for said in () if saved is None or args.quiet else saved.said:
                print(fitted(said, ""))
            result = self._measure(args, taken, prompt.strip(), spec, configured)
            replaced = store(namespace, args.var, result) if args.var is not None else None
            shown, unsaved = finish(args, result, ahead, say=lambda line: None if args.quiet else print(line))
        except KVMagicError as error:
            raise _usage_error(error) from None
        if unsaved:  # the result stays the cell's value (and -v's): only the file is missing
            print(f"UsageError: {_usage_error(KVMagicError(unsaved))}", file=sys.stderr)
        for addon in addons():
            addon.beside(args, result)
        if replaced and not args.quiet:
            print(replaced)
        if args.output:
            return shown
        if args.quiet:
            return None
        from kvmagic.results.display import styled_table

        metadata = {"model": result.model, **result.setup()}
        wide = resolved(args, configured, "wide")
        return styled_table(shown.to_dataframe(), metadata, shown.notes(), wide=wide, result=result)

    def _measure(self, args: Any, taken: AddOn | None, prompt: str, spec: BenchSpec, configured: dict[str, Any]) -> Any:
        """The model %kvload loaded, measured here, once what needs no model has been checked; or what the add-on
        that took the request over (``taken``) returns, handed the model loaded here, saying each model it loads: a
        result shown, saved and kept as a measured one."""
        from kvmagic.runner.benchmark import run_benchmark

        check_before_loading(spec, prompt)
        if taken is not None:
            said = None if args.quiet else (lambda loaded: print(fitted(loaded.summary(), "")))
            held = None if self.loaded is None else (self.loaded, self.loaded_with)
            return taken.run(args, configured, "magic", prompt, spec, said, held)
        assert self.loaded is not None  # refused before, with what to do
        return run_benchmark(self.loaded, prompt, spec, progress=not args.quiet)

    def unload(self) -> None:
        """Drop the loaded model and free its memory."""
        if self.loaded is None:
            return
        from kvmagic.measure.accelerator import release_memory

        self.loaded = None
        forget_last_failure()
        release_memory()
