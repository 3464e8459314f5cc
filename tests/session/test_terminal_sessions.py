"""Sessions in a real terminal IPython, 100 columns wide, every run showing its progress bar: a scripted
one, then a seeded random one (in the same IPython when the first passed)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .cells import TERMINAL, drawn
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
