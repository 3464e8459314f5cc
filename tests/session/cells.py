"""The cells a session types, what each should do in the state the session is in, and the sequences.

A cell knows its kind; what it should do depends on the state before it (a run with no model loaded is
a mistake). Scripted sequences reproduce what a user reported; random ones are drawn with a fixed seed
from :data:`VOCABULARY`, every run at ``-n 2 -w 0`` so that a sequence stays fast on two cores.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from enum import Enum

__all__ = ["SCRIPTED", "SETUP", "TERMINAL", "VOCABULARY", "Cell", "Kind", "State", "dealt", "drawn", "expected"]

PROMPT = "인공지능은 데이터를 학습하여 패턴을 찾는다. 이를 활용하면"  # the source experiment's prompt
SHORT = "The KV cache stores each token's keys and values so that"


class Kind(Enum):
    DEFINE = "define"  # user code that shows nothing
    VALUE = "value"  # an expression whose repr is known
    RUN = "run"  # a good %%kvbench (or line form)
    MISTAKE = "mistake"  # refused with one UsageError
    HELP = "help"  # %kvbench? / %%kvbench?
    INTERRUPT = "interrupt"  # a run interrupted once it has started
    LOAD = "load"  # %kvload tiny, first time or again
    LOAD_MISSING = "load missing"  # %kvload of a model that is nowhere: an offline error
    UNLOAD_EXT = "unload ext"
    LOAD_EXT = "load ext"


@dataclass(frozen=True)
class Cell:
    source: str
    kind: Kind
    value: str = ""  # VALUE: the repr it shows; HELP: the spelling whose help it asks for
    shows: bool = True  # RUN: whether it displays a result (-q does not)
    stores: str = ""  # RUN: the name -v binds
    defines: str = ""  # DEFINE: the user's variable it binds, checked after every later cell


@dataclass(frozen=True)
class State:
    """What the session holds: the extension, the model, the user's variables, the names -v bound."""

    ext: bool = False
    model: str | None = None
    names: frozenset[str] = frozenset()
    results: frozenset[str] = frozenset()


def expected(cell: Cell, state: State) -> str:
    """What ``cell`` should do after ``state``: ok, value, result, quiet, usage, help or interrupted."""
    ready = state.ext and state.model is not None
    if cell.kind in (Kind.RUN, Kind.INTERRUPT) and not ready:
        return "usage"  # no model (or no extension): one line saying what to run first
    if cell.kind is Kind.LOAD:
        return "ok" if state.ext else "usage"
    return {
        Kind.DEFINE: "ok",
        Kind.VALUE: "value",
        Kind.RUN: "result" if cell.shows else "quiet",
        Kind.MISTAKE: "usage",
        Kind.HELP: "help",
        Kind.INTERRUPT: "interrupted",
        Kind.LOAD_MISSING: "usage",
        Kind.UNLOAD_EXT: "ok",
        Kind.LOAD_EXT: "ok",
    }[cell.kind]


def after(cell: Cell, state: State) -> State:
    """The state once ``cell`` has done what :func:`expected` says."""
    outcome = expected(cell, state)
    if cell.kind is Kind.LOAD and outcome == "ok":
        return dataclasses.replace(state, model="tiny")
    if cell.kind is Kind.DEFINE and cell.defines:
        return dataclasses.replace(state, names=state.names | {cell.defines})
    if cell.kind is Kind.UNLOAD_EXT:
        return dataclasses.replace(state, ext=False, model=None)
    if cell.kind is Kind.LOAD_EXT:
        return dataclasses.replace(state, ext=True)
    if cell.kind is Kind.RUN and cell.stores and outcome == "result":
        return dataclasses.replace(state, results=state.results | {cell.stores})
    return state


def bench(line: str, body: str = SHORT, *, shows: bool = True, stores: str = "") -> Cell:
    return Cell(f"%%kvbench {line}\n{body}", Kind.RUN, shows=shows, stores=stores)


def mistake(line: str, body: str = SHORT) -> Cell:
    return Cell(f"%%kvbench {line}\n{body}", Kind.MISTAKE)


CANARY = "class Canary:\n    def __init__(self):\n        self.items = [1, 2, 3]\n    def __repr__(self):\n        return f'Canary({self.items})'"
SETUP = [
    Cell("x = 41", Kind.DEFINE, defines="x"),
    Cell(CANARY, Kind.DEFINE),
    Cell("canary = Canary()", Kind.DEFINE, defines="canary"),
    Cell("1 + 1", Kind.VALUE, "2"),
    Cell("%load_ext kvmagic", Kind.LOAD_EXT),
    Cell("%kvload tiny", Kind.LOAD),
]
USER_NAMES = {"x": "41", "canary": "Canary([1, 2, 3])"}

GOOD = bench("-n 2 -w 0")
SWEEP = bench("-n 2,3 -w 0")
LINE_FORM = Cell('%kvbench -n 2 -w 0 "a prompt"', Kind.RUN)
# Long enough to interrupt, and no estimate first: its progress bar is its first output.
LONG_SWEEP = Cell(f"%%kvbench -n 200,300,400 -w 0 --max-seconds 0\n{SHORT}", Kind.INTERRUPT)
# One configuration: nothing finished to show, so the interrupt itself is the answer, in one line. Its
# estimate (past a few seconds) gives it a bar, whose start is the moment to interrupt.
LONG_RUN = Cell(f"%%kvbench -n 400 -w 0\n{SHORT}", Kind.INTERRUPT)
HELP_LINE, HELP_CELL = Cell("%kvbench?", Kind.HELP, "%kvbench"), Cell("%%kvbench?", Kind.HELP, "%%kvbench")
NO_SUCH_MODEL = Cell("%kvload no-such-user/no-such-model", Kind.LOAD_MISSING)
LAST = Cell("_ is Out[max(Out)]", Kind.VALUE, "True")  # the last output, where IPython keeps it twice
RELOAD_EXT = [Cell("%unload_ext kvmagic", Kind.UNLOAD_EXT), Cell("%load_ext kvmagic", Kind.LOAD_EXT)]

# Each entry is one step: a cell, or cells a user types together (unloading the extension, then loading it).
VOCABULARY: list[list[Cell]] = [
    [GOOD], [bench("-n 2 -w 0", PROMPT)], [bench("-n 2 -w 0 -q", shows=False)], [bench("-n 2 -w 0 -o")],
    [bench("-n 2 -w 0 -v res", stores="res")], [SWEEP], [bench("-n 2,3 -w 0 --max-seconds 0")],
    [bench("-n 2 -w 0 --cache off,dynamic,static")], [bench("-n 2 -w 0 --cache off,dynamic,static --limits")],
    [bench("-n 2 -w 0 -r 3")], [LINE_FORM],
    [bench("-n 2 -w 0 --prefix 4")], [bench("-n 2 -w 0 --prefix marked", f"A system prompt.\n---\n{SHORT}")],
    [mistake("-n 2 -w 0 --prefix 999")], [mistake("-n 2 -w 0 --cache dynamic --quality-text no-such-file.txt")],
    [mistake("-n 0")], [mistake("-n 2 -w 0 --bogus")], [mistake("-n 2 -w zero")], [mistake("-n 5000 -w 0")],
    [mistake("-n 2 -w 0 --cache off,nonsense")], [mistake("-n 2 -w 0 -v 2x")],
    [Cell("1 + 1", Kind.VALUE, "2")], [Cell("x + 1", Kind.VALUE, "42")], [LAST],
    [HELP_LINE], [HELP_CELL], [LONG_SWEEP],
    [Cell("%kvload tiny", Kind.LOAD)], [NO_SUCH_MODEL],
    RELOAD_EXT,
]  # fmt: skip


def _answered(cells: list[Cell]) -> list[Cell]:
    """``cells``, then what brings the model back if they dropped it, then a run that must answer."""
    state = State()
    for cell in cells:
        state = after(cell, state)
    ending = [] if state.ext else [RELOAD_EXT[1]]
    ending += [] if state.model is not None else [Cell("%kvload tiny", Kind.LOAD)]
    return [*cells, *ending, GOOD]


def drawn(seed: int, steps: int = 8) -> list[Cell]:
    """The setup, then ``steps`` steps drawn from the vocabulary with ``seed`` (repeats allowed)."""
    rng = random.Random(seed)
    return _answered([*SETUP, *(cell for _ in range(steps) for cell in rng.choice(VOCABULARY))])


def dealt(seed: int, hands: int) -> list[list[Cell]]:
    """The vocabulary shuffled with ``seed`` and dealt into ``hands`` sequences, each after the setup:
    every step is played in one of them."""
    steps = random.Random(seed).sample(VOCABULARY, len(VOCABULARY))
    return [_answered([*SETUP, *(cell for step in steps[hand::hands] for cell in step)]) for hand in range(hands)]


# Scripted sequences, each reproducing one report of issue 20 (and then going on as a user would).
SCRIPTED: dict[str, list[Cell]] = {
    "mistake_then_run": [*SETUP, mistake("-n 0"), GOOD, Cell("x + 1", Kind.VALUE, "42"), LAST, GOOD],
    "cache_limits": [*SETUP, bench("-n 2 -w 0 --cache off,dynamic,static --limits"), GOOD],
    "help_and_line_form": [*SETUP, HELP_LINE, HELP_CELL, LINE_FORM, GOOD],
    "progress": [*SETUP, GOOD, SWEEP, bench("-n 2,3 -w 0 --max-seconds 0"), bench("-n 2 -w 0 -b 8"), GOOD],
    "interrupt_and_reload": [
        *SETUP,
        LONG_SWEEP,
        GOOD,
        LONG_RUN,
        GOOD,
        NO_SUCH_MODEL,
        GOOD,
        Cell("%kvload tiny", Kind.LOAD),
        GOOD,
        *RELOAD_EXT,
        GOOD,
        Cell("%kvload tiny", Kind.LOAD),
        GOOD,
    ],
    "options": [
        *SETUP,
        bench("-n 2 -w 0 -o"),
        bench("-n 2 -w 0 -v res", stores="res"),
        mistake("-n 2 -w 0 --bogus"),
        mistake("-n 2 -w zero"),
        bench("-n 2 -w 0 --cache off,dynamic,static"),
        SWEEP,
        Cell("1 + 1", Kind.VALUE, "2"),
        bench("-n 2 -w 0 -q", shows=False),
        GOOD,
    ],
}

# The terminal: the same kinds of cells, typed at a 100-column IPython prompt.
TERMINAL: list[Cell] = [
    *SETUP, mistake("-n 0"), GOOD, Cell("x + 1", Kind.VALUE, "42"), LONG_SWEEP, SWEEP, LONG_RUN, GOOD, HELP_LINE,
    NO_SUCH_MODEL, GOOD,
]  # fmt: skip
