"""The seam: what an add-on is, and how the centre finds every one without naming any.

The centre is the plain pair (the cache off against on) and a comparison of strategies. Every other capability
(limits, the memory frontier, a prediction, a reused prefix, a split model, models side by side, ...) is an add-on:
a folder of ``kvmagic/addons/`` whose :class:`AddOn` the registry (``kvmagic/addons/__init__.py``) lists. The centre
iterates over :func:`addons` at each joint, as pytest calls its plugins' hooks and optimum-benchmark its backends,
launchers and trackers through one base class each:

- the model: its keywords of ``load_model`` and their flags (``load_fields``, ``load_options``), the model it builds
  its own way where they ask (``build``) and what it refuses of that before anything loads (``check_build``), how
  they build a directory without weights (``without_weights``), what a result's metadata records of the model
  (``environment``), and what a loaded model answers for it (``loaded_attributes``);
- the request: a saved run a front end's request starts from, filled in where the user typed nothing (``saved``);
  the options an add-on adds (``fields``, ``options``), what it refuses beside them (``refuse``) and
  in the prompt before any model loads (``check_prompt``), whether it makes the request a comparison of strategies
  (``compares``), and what a comparison with a baseline reads of them (``recorded``);
- the plan: the prompt's ids where it reads the prompt its own way (``encoded``) and the strategies it adds
  (``strategies``);
- the run: what it does before the first timed run (``before``), which configurations it leaves out of those the
  run measures (``todo``: past a budget of its own, say), what it does before each configuration's timed rounds
  (``starting``) and after the last one (``after``), the data a result keeps of it, under its ``name``; or the whole
  run, where it takes a front end's request over (``takes``, ``run``: a loop over runs, or one process of several a
  launcher starts, say), and what ``%kvload`` then cannot load (``refuse_load``); where it places the command's
  process itself, what the command's words mean to it before they are parsed (``misread``), and how the command
  begins and ends such a request (``begin``, ``end``) and says a refusal (``refusing``); around any run, what a front
  end reads for it before the run (``read_ahead``), shows of its result (``showing``) and makes the command's exit
  status (``exit_status``); what the magic shows beside a result's table (``beside``: a figure, say);
- how the run is run, asked of every add-on whether the request uses it or not (each reads what the plan holds: a
  model loaded as one of several ranks in lockstep, say): the untimed runs it adds at each configuration, which the
  budget counts (``extra_runs``), what it makes of each configuration's measurements once their rounds are done
  (``measured``), and of the result once it is built (``finished``);
- the result: the columns it adds (``row_columns``, ``pair_columns``) and the plain run's rows (``pair_rows``), its
  notes (``notes``, ``notes_last``), what "how this was measured" lists of its data (``facts``), what a file keeps of
  it (``dump``, ``load``, ``upgrade`` for an older format, ``in_metadata`` for the current one's older layout) and of
  its data on each measurement (``dump_measurement``, ``load_measurement``), and what a result and a measurement
  answer for it (``attributes``, ``measurement_attributes``); what it adds to the line on how quality was read
  (``quality_said``); any table of its own the columns page lists (``tables``); a result of a kind of its own has its
  files (``refuse_file``, ``read_back``) and its names in kvmagic's API (``api``); the files it writes of a result
  (``exports``).

A hook's default does nothing, so an add-on overrides only what it needs. Hooks take the objects of the layer that
calls them (the runner's plan, a result's record); they are typed ``Any`` here, below those layers, and each
add-on types its own overrides.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

__all__ = ["REGISTRY", "AddOn", "Field", "SavedRequest", "addon", "addons", "answered", "used_by"]

REGISTRY = "kvmagic.addons"  # the package whose ``ADDONS`` lists every add-on, in the order their hooks run


def _as_written(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class Field:
    """A request field an add-on adds: its name (a keyword of ``run_benchmark``, a key of a saved request), its
    default, and its check, which returns the value as the request keeps it or raises a
    :class:`~kvmagic.errors.KVMagicError` that says what it takes. ``saved`` reads a saved request's value as the
    field takes it now, where an older kvmagic spelled it otherwise; the check alone refuses that spelling."""

    name: str
    default: Any
    check: Callable[[str, Any], Any]
    saved: Callable[[Any], Any] = _as_written


@dataclass(frozen=True)
class SavedRequest:
    """A request read from a saved run, which a front end runs as it runs one typed in full: its ``prompt``, the
    ``baseline`` (the saved run, a one-run result, which an add-on's ``read_ahead`` may set the new run beside) and
    the name that says it, the request fields a parsed option cannot hold as the file does (``fields``: a text whose
    flag reads a file), and what cannot be rerun here (``said``: one line each, said before the run)."""

    prompt: str
    baseline: Any
    name: str
    fields: Mapping[str, Any] = field(default_factory=dict)
    said: tuple[str, ...] = ()


class AddOn:
    """One capability beyond the plain pair and a comparison of strategies. Override the hooks it needs."""

    name: str = ""  # its key: in a record's add-on data, and the fields it owns in a file
    fields: tuple[Field, ...] = ()
    options: tuple[Any, ...] = ()  # its :class:`~kvmagic.frontends.options.Option`s: flags, help and examples
    row_columns: tuple[Any, ...] = ()  # its :class:`~kvmagic.results.columns.Column`s of a comparison's rows
    pair_columns: tuple[Any, ...] = ()  # and of the plain run's view
    about: str = ""  # what the columns page says of its columns

    load_fields: tuple[Field, ...] = ()  # its keywords of ``load_model``: how a model loads, not what a run measures
    load_options: tuple[Any, ...] = ()  # and their :class:`~kvmagic.frontends.options.Option`s, of ``%kvload``
    # What a loaded model answers for it, by attribute (``loaded.stand_in_tokenizer``), each read from the model.
    loaded_attributes: ClassVar[Mapping[str, Callable[[Any], Any]]] = {}

    def build(self, name: str, load: Mapping[str, Any], before_weights: Callable[[], None] | None) -> Any:
        """The model ``name`` (a :class:`~kvmagic.measure.loaded.LoadedModel`) where ``load`` (``load_model``'s
        keywords, checked) asks this add-on to build it, ``before_weights`` run before its weights take memory; None
        lets the centre load it. Asked of every add-on, in the registry's order."""
        return None

    def check_build(self, name: str, load: Mapping[str, Any]) -> bool:
        """Where ``load`` (``load_model``'s keywords that name the model: revision, gguf_file, trust_remote_code, the
        add-ons') asks it to build ``name``: raise what it cannot build, reading no weights (several models are
        checked before the first loads), else True; False: the model loads as the centre loads it."""
        return False

    def without_weights(self, name: str) -> Exception | None:
        """The refusal of a directory ``name`` that holds a config but no weights, where its load options build such
        a model all the same (it says how); None leaves the centre's."""
        return None

    def environment(self, loaded: Any) -> dict[str, Any]:
        """What a result's metadata records of the model ``loaded`` beside its environment; asked of every add-on."""
        return {}

    def used(self, spec: Any) -> bool:
        """Whether a request (a :class:`~kvmagic.core.spec.BenchSpec`) asks for it."""
        return False

    def saved(
        self, args: Any, typed: frozenset[str], host: str, prompt: Callable[[], str | None]
    ) -> SavedRequest | None:
        """Where a front end's parsed request (``args``, as ``host`` parsed them) names a saved run to rerun: ``args``
        filled in from it, in place, but for what the user typed (``typed``: those options' names), and the run to
        compare with. ``prompt`` reads the prompt the user gave (None: none). None: the request is the one typed.
        It runs before anything else reads ``args``, and refuses what they cannot ask of a saved run."""
        return None

    def refuse(self, spec: Any) -> None:
        """Raise what its fields cannot go with, in the request's words (each message one line, naming only the
        fields given)."""

    def check_prompt(self, spec: Any, prompt: str) -> None:
        """Raise what the prompt cannot give a request that uses it, before any model loads (a typo then costs no
        load)."""

    def compares(self, fields: Mapping[str, Any]) -> bool:
        """Whether a request whose add-on fields are ``fields`` (by name: a request's, or a front end's parsed
        options) compares strategies, a row each, rather than the cache off against on side by side."""
        return False

    def recorded(self, spec: Any) -> dict[str, Any]:
        """What of its fields a comparison with a baseline reads: a difference there could change the timed runs."""
        return {}

    def encoded(self, loaded: Any, prompt: str, spec: Any) -> Any:
        """The prompt as ids (a ``BatchEncoding``) where a request that uses it reads the prompt its own way; None
        leaves it to the centre."""
        return None

    def strategies(self, spec: Any, setups: list[Any]) -> list[Any]:
        """The strategies a request that uses it runs, from those the centre resolved (each a
        :class:`~kvmagic.measure.strategies.Setup`): a variant it adds comes after them."""
        return setups

    def before(self, plan: Any) -> Any:
        """Before the first timed run (after the plan, before the warm-up): what ``after`` needs, e.g. a probe."""
        return None

    def todo(self, plan: Any, todo: list[Any], before: Any) -> list[Any]:
        """The configurations to measure, in the order to measure them (each a :class:`~kvmagic.core.config.Config`),
        of ``todo``: those the centre planned, the least work first, as the add-ons before it left them. One it leaves
        out is not measured (its data may still say something of it); ``before`` is what :meth:`before` returned."""
        return todo

    def starting(self, plan: Any, inputs: Any, setups: list[Any], before: Any) -> list[Any]:
        """Before each configuration's timed rounds, on its ``inputs``: the strategies as they run there (one that
        starts from a cache of its own made untimed, say); ``before`` is what :meth:`before` returned."""
        return setups

    def after(self, plan: Any, measurements: list[Any], before: Any) -> Any:
        """After the last timed run: the data a result keeps of it (None: nothing)."""
        return None

    def extra_runs(self, plan: Any) -> int:
        """Untimed runs of each strategy it makes at each configuration beside the timed rounds (in ``measured``,
        say), which the budget counts; asked of every add-on."""
        return 0

    def measured(self, plan: Any, inputs: Any, measurements: list[Any], runs: Mapping[Any, Any]) -> list[Any]:
        """A configuration's measurements once its timed rounds are done, on its ``inputs``, before any run that
        explains them (a hooked one): as the result keeps them, with its data on each where it keeps some
        (``Measurement.addons``, under its ``name``). ``runs`` holds what each strategy's timed runs left beside its
        measurement (a :class:`~kvmagic.runner.rounds.TimedRuns` by strategy). Asked of every add-on."""
        return measurements

    def finished(self, plan: Any, result: Any) -> Any:
        """The result as the run returns it, once built (a :class:`~kvmagic.results.result.BenchmarkResult`): where
        several processes measured it in lockstep, say, their views put together. Asked of every add-on."""
        return result

    def pair_rows(self, record: Any, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The plain run's table as it shows, from ``rows`` (one a configuration measured, each by column): with a row
        of its own for a configuration it has figures of but that was not measured, say. Asked where it ``shows``."""
        return rows

    def notes(self, record: Any) -> list[str]:
        """What a reader of the table should know of it, the most important first."""
        return []

    def quality_said(self, record: Any) -> str:
        """What the line on how quality was read adds of it, where it changes what those figures mean (a clause)."""
        return ""

    # Whether its notes come after the centre's last (how quality was read) rather than before: the first a shown
    # table's few lines leave out.
    notes_last: bool = False

    def shows(self, record: Any) -> bool:
        """Whether a result's table has its columns."""
        return record.addons.get(self.name) is not None

    def facts(self, data: Any) -> dict[str, Any]:
        """What of its data (where a result holds some) "how this was measured" lists beside the run's facts; a
        comparison with a baseline reads them too."""
        return {}

    def dump(self, data: Any) -> dict[str, Any]:
        """Its data as the top-level fields of a saved result (JSON's types only); a mapping under a key the centre
        writes a mapping under too (``facts``) joins the centre's."""
        return {}

    def load(self, saved: Mapping[str, Any]) -> Any:
        """Its data from a saved result's top-level fields, as the current format keeps them; None where it has none."""
        return None

    def upgrade(self, saved: Mapping[str, Any]) -> Mapping[str, Any]:
        """A file of an older format (still read) with its data moved where the current format keeps it (and out of
        where the older one did): the centre calls it before converting the rest, then ``load`` reads the result."""
        return saved

    def dump_measurement(self, data: Any) -> dict[str, Any]:
        """Its data on one measurement (``Measurement.addons[name]``; None where it kept none) as top-level fields of
        the measurement's saved record (JSON's types only)."""
        return {}

    def load_measurement(self, saved: Mapping[str, Any]) -> Any:
        """Its data on one measurement from the fields of the measurement's saved record; None where it has none."""
        return None

    # Keys of a saved result's metadata that are its data, where a file of the current format kept them before it had
    # a place of its own (``load`` reads them there): the result's metadata leaves them out.
    in_metadata: tuple[str, ...] = ()
    # The files it writes, by suffix (``.html``): each writes a result (``--save PATH``, ``result.save(PATH)``).
    exports: ClassVar[Mapping[str, Callable[[Any, Path], None]]] = {}
    # What a result answers for it, by attribute (``result.limits``, ``result.choice``), each read from the result
    # (its record): the centre never reads these, a user's notebook and an older caller do.
    attributes: ClassVar[Mapping[str, Callable[[Any], Any]]] = {}
    # And what a measurement answers of its data on it (``m.ranks``), each read from the measurement.
    measurement_attributes: ClassVar[Mapping[str, Callable[[Any], Any]]] = {}

    def takes(self, args: Any, configured: Mapping[str, Any], host: str) -> bool:
        """Whether it runs the request a front end parsed (``args``, as ``host``, "magic" or "cli", parsed them;
        ``configured``, the defaults they fall back on) in place of ``run_benchmark`` on the one model loaded. Both
        front ends ask every add-on before anything loads: it refuses there what the request cannot ask of it."""
        return False

    def run(
        self, args: Any, configured: Mapping[str, Any], host: str, prompt: str, spec: Any,
        on_load: Callable[[Any], None] | None, held: tuple[Any, Mapping[str, Any]] | None = None,
    ) -> Any:  # fmt: skip
        """Run a request it ``takes``: ``prompt`` and ``spec`` as ``run_benchmark`` takes them, checked; ``on_load``
        is told of each model it loads (a :class:`~kvmagic.measure.loaded.LoadedModel`), to say so; ``held`` is the
        model the front end holds, with the keywords that loaded it (``%kvload``'s), where it holds one. It returns
        what the front ends show, save and keep as they do ``run_benchmark``'s result."""
        return None

    def misread(self, words: Sequence[str]) -> str:
        """What the command's parser would misread in ``words``, as typed (another front end's spelling of one of its
        options, say), as the one message that refuses them; empty where nothing."""
        return ""

    def begin(self, args: Any, words: Sequence[str]) -> None:
        """The command begins a request it ``takes`` (``words``: as typed), before it reads anything of it (its
        prompt, its files, a saved baseline): where the request runs this process as one of several a launcher
        started, it takes its place among them here, or refuses, saying how to start them."""

    def refusing(self, args: Any, error: Any) -> None:
        """Before the command says why it refuses the request ``args`` (``error``, a
        :class:`~kvmagic.errors.KVMagicError`), asked of every add-on: where several processes refuse alike, it
        leaves the refusal for their launcher and lets the first of them say it."""

    def beside(self, args: Any, result: Any) -> None:
        """The magic has run the request it parsed (``args``) and saved its ``result`` (of any kind: several models'
        too): what it shows beside the table, shown here, before the table is the cell's value. Asked of every
        add-on."""

    def end(self, status: int) -> None:
        """The command ends a request it ran, once it has said all it had to, with its exit status: where the
        process must end its own way, it ends here and does not return."""

    def read_ahead(self, args: Any, saved: SavedRequest | None) -> Any:
        """What a front end's request (``args``; ``saved``, the saved run it starts from, where there is one) asks
        it to read before the run, once the front end has read the prompt and before it builds the request: a file
        read now costs no run when it cannot be read, and what the options cannot ask is refused before any model
        loads. Asked of every add-on; what it returns (None: nothing) ``showing`` and ``exit_status`` get back."""
        return None

    def showing(self, args: Any, shown: Any, ahead: Any) -> Any:
        """What a front end shows (and ``-o`` returns) of the run's result, once saved: ``shown`` (the result, or
        what an add-on before it made of it) as it is, or set beside what :meth:`read_ahead` returned (``ahead``)."""
        return shown

    def exit_status(self, args: Any, shown: Any, ahead: Any) -> int:
        """The command's exit status for what it showed (``shown``), once its output is out: 0, or where a check the
        request asked of it found a fault 1 and where it could not tell 2, each said on stderr."""
        return 0

    def refuse_load(self, load: Mapping[str, Any]) -> None:
        """Raise, where ``%kvload`` is asked to load what it cannot (``load``: ``load_model``'s keywords) but a
        benchmark of this add-on's measures, how to ask the benchmark instead."""

    def refuse_file(self, saved: Any) -> None:
        """Raise, where ``saved`` (what a file read as one run's result holds) is a file of a kind of its own, what
        reads it instead."""

    # How a notebook reads back a file of its own kind, where it writes one (its result's ``read_json``, and for which
    # request): the command's advice on plotting a saved run adds it.
    read_back: str = ""
    # Tables of its own beside a result's table that docs/columns.md describes: each the Markdown that introduces it,
    # and its :class:`~kvmagic.results.columns.Column`s.
    tables: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    # The names it adds to kvmagic's public API (a function that runs it, its result's class), each with the module
    # that defines it: ``kvmagic`` imports that module on first use, and names no add-on.
    api: ClassVar[Mapping[str, str]] = {}


def addons() -> tuple[AddOn, ...]:
    """Every add-on, in the registry's order: the registry is imported on first use, so that no module of the
    centre names an add-on and importing kvmagic stays light."""
    found: tuple[AddOn, ...] = importlib.import_module(REGISTRY).ADDONS
    return found


def answered(owner: Any, name: str, table: str) -> Any:
    """What an add-on answers for ``owner.name`` (a record's or a measurement's attribute no class declares), from
    its ``attributes`` or ``measurement_attributes`` as ``table`` says."""
    if name.startswith("__") or "addons" not in owner.__dict__:  # copy and pickle ask before it is made
        raise AttributeError(name)
    for found in addons():
        answers: Mapping[str, Callable[[Any], Any]] = getattr(found, table)
        if name in answers:
            return answers[name](owner)
    raise AttributeError(f"{type(owner).__name__!r} has no attribute {name!r}")


def used_by(spec: Any) -> tuple[AddOn, ...]:
    """The add-ons a request (a :class:`~kvmagic.core.spec.BenchSpec`) uses, in the registry's order."""
    return tuple(found for found in addons() if found.used(spec))


def addon(name: str) -> AddOn | None:
    """The add-on called ``name``; None where none is."""
    return next((found for found in addons() if found.name == name), None)
