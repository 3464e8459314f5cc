"""Sessions in a real Jupyter kernel: scripted ones that reproduce issue 20's reports, seeded random ones.

A kernel whose sequence passed goes on to the next sequence, as a user's session goes on; one that
failed is shut down and the next sequence starts a fresh one. In the random sequences and in
``progress``, every run shows its progress bar (:func:`tests.session.inside.show_every_bar`), as a run
estimated past a few seconds does: at ``-n 2`` none would, and the harness would never see how a bar ends.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .cells import SCRIPTED, SETUP, bench, dealt
from .kernel import STILL_S, KernelSession
from .play import ROOT, Pool, environment, play

SEED, HANDS = 20, 3  # the vocabulary, shuffled, dealt into three sequences


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pool]:
    env = environment(tmp_path_factory.mktemp("ipython"))
    pool = Pool(lambda: KernelSession(env, ROOT))
    yield pool
    pool.close()


@pytest.mark.parametrize("name", list(SCRIPTED))
def test_a_scripted_session_in_a_kernel(kernels: Pool, name: str) -> None:
    with kernels.session() as kernel:
        kernel.show_every_bar(name == "progress")
        play(name, SCRIPTED[name], kernel)


@pytest.mark.parametrize("hand", range(HANDS))
def test_a_random_session_in_a_kernel(kernels: Pool, hand: int) -> None:
    with kernels.session() as kernel:
        kernel.show_every_bar(True)
        play(f"random, seed {SEED}, hand {hand + 1} of {HANDS}", dealt(SEED, HANDS)[hand], kernel)


def test_a_runs_bar_moves_within_two_seconds_and_ends_full(kernels: Pool) -> None:
    """On a model slow enough to watch (each forward waits 50 ms more: 80 of them take 4 s, so the run outlasts the check on any
    machine), the bar as shipped advances within STILL_S of appearing and ends full; the check is not vacuous."""
    with kernels.session() as kernel:
        kernel.show_every_bar(False)
        play("setup", SETUP, kernel)
        kernel.slow(0.05)
        try:
            play("a slow model's run", [bench("-n 40 -w 0")], kernel)
        finally:
            kernel.slow(0.0)
        bars = kernel.widgets.progress(kernel.cells - 1)
        assert bars, "the run showed no progress bar"
        assert all(kernel.widgets.last[bar] - kernel.widgets.opened[bar] > STILL_S for bar in bars)
