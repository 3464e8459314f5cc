"""Sessions in a real terminal IPython, 100 columns wide, every run showing its progress bar: a scripted
one, then a seeded random one (in the same IPython when the first passed)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .cells import SETUP, TERMINAL, bench, drawn
from .checks import STILL_S
from .play import ROOT, Pool, environment, play
from .terminal import TerminalSession

SEED = 4


@pytest.fixture(scope="module")
def terminals(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pool]:
    env = environment(tmp_path_factory.mktemp("ipython"))
    pool = Pool(lambda: TerminalSession(env, ROOT))
    yield pool
    pool.close()


def test_a_scripted_session_in_a_terminal(terminals: Pool) -> None:
    with terminals.session() as terminal:
        play("terminal", TERMINAL, terminal)


def test_a_random_session_in_a_terminal(terminals: Pool) -> None:
    with terminals.session() as terminal:
        play(f"terminal random, seed {SEED}", drawn(SEED), terminal)


def test_a_runs_bar_moves_within_two_seconds_and_ends_full(terminals: Pool) -> None:
    """As in a kernel: on a model slow enough to watch, the bar at 100 columns advances within STILL_S of its
    first drawing and ends full (an unfinished bar left on the screen is a problem of every cell)."""
    with terminals.session() as terminal:
        play("setup", SETUP, terminal)
        terminal.slow(0.05)
        try:
            [record] = play("a slow model's run", [bench("-n 40 -w 0")], terminal)
        finally:
            terminal.slow(0.0)
        assert record.marks and record.marks[-1][0] - record.marks[0][0] > STILL_S, record.marks
        assert record.marks[-1][1].startswith("100%|"), record.marks
