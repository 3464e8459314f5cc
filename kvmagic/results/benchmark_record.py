"""What a benchmark found, as data: a :class:`~kvmagic.results.measurement.Measurement` per (configuration,
strategy), the request, and where it ran. It knows no rendering: the tables, notes and files are functions of it in
the sibling modules, and :class:`~kvmagic.results.result.BenchmarkResult` adds them as methods (an add-on's figure
as its attribute)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kvmagic.core.addon import addons, answered
from kvmagic.core.config import Config
from kvmagic.core.spec import BenchSpec
from kvmagic.core.strategy import DYNAMIC, OFF, PAIR, REFERENCE, ByStrategy, Strategy
from kvmagic.errors import KVMagicError
from kvmagic.results.measurement import Measurement, Pair
from kvmagic.results.records import RunFacts

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["PAIR_NAMES", "BenchmarkRecord"]

PAIR_NAMES = {OFF: "uncached", DYNAMIC: "cached"}  # how the plain run's table and notes name its two strategies


@dataclass(repr=False)
class BenchmarkRecord:
    """What ``%%kvbench`` found: a :class:`Measurement` per (configuration, strategy), the request, where it ran.

    ``strategies`` names every strategy asked for, in order (``off`` and ``dynamic`` for the plain run), and
    ``skipped`` why some could not run here, ``remarks`` what to know of some that ran (a press on a model
    kvpress has not tested). ``metadata`` records the environment (versions, device,
    dtype); ``facts`` what the run found out besides times. ``addons`` holds what each add-on the run used kept, by
    its name; a result answers what an add-on says of its data as attributes (``result.limits``).
    """

    model: str
    measurements: list[Measurement]
    spec: BenchSpec = field(default_factory=BenchSpec)
    strategies: list[Strategy] = field(default_factory=lambda: list(PAIR))
    skipped: dict[Strategy, str] = field(default_factory=dict)
    remarks: dict[Strategy, str] = field(default_factory=dict)  # strategy -> what a reader of its rows should know
    metadata: dict[str, Any] = field(default_factory=dict)
    facts: RunFacts = field(default_factory=RunFacts)
    addons: dict[str, Any] = field(default_factory=dict)  # add-on name -> what it kept of the run

    def __post_init__(self) -> None:
        """Strategies given by their names (a file, an older caller) are read once, at the width the request chose:
        a name leaves it out, and a run's own strategies carry it, so both read back alike."""
        bits = self.spec.kv_bits
        self.strategies = [Strategy.of(s, bits) for s in self.strategies]
        self.skipped = ByStrategy({Strategy.of(s, bits): why for s, why in self.skipped.items()})
        self.remarks = ByStrategy({Strategy.of(s, bits): what for s, what in self.remarks.items()})
        self.measurements = [
            m if (read := Strategy.of(m.strategy, bits)) == m.strategy else dataclasses.replace(m, strategy=read)
            for m in self.measurements
        ]

    if not TYPE_CHECKING:  # what an add-on says of its data (``result.limits``); the centre reads ``addons``

        def __getattr__(self, name: str) -> Any:
            return answered(self, name, "attributes")

    @property
    def partial(self) -> bool:
        """Stopped before its last configuration (interrupted, out of memory): the rows here are complete."""
        return bool(self.facts.stopped)

    @property
    def plain(self) -> bool:
        """The cache off against on, shown side by side, rather than a comparison of strategies."""
        return self.spec.plain

    @property
    def configs(self) -> list[Config]:
        """The configurations measured, in the order they ran."""
        return list(dict.fromkeys(m.config for m in self.measurements))

    @property
    def config(self) -> Config:
        """The only configuration (a sweep's are in ``configs``)."""
        return self._only_config()

    def measurement(self, strategy: Strategy | str, config: Config | None = None) -> Measurement | None:
        """``strategy``'s measurement at ``config`` (the only one, if none is given); None if it did not run. A name
        is read as rows and files spell a strategy (``"quantized:quanto"``, whatever width it stored)."""
        config = config or self._only_config()
        if isinstance(strategy, str):
            named = str(Strategy.of(strategy))  # the spelling as written back (".5" is "0.5")
            return next((m for m in self.measurements if m.config == config and m.strategy.named(named)), None)
        return next((m for m in self.measurements if m.config == config and m.strategy == strategy), None)

    def pair(self, config: Config | None = None, strategy: Strategy | str | None = None) -> Pair | None:
        """The reference against ``strategy`` (the plain run's ``dynamic`` by default) at ``config``."""
        config = config or self._only_config()
        others = self._other_strategies()
        other = strategy or (others[0] if len(others) == 1 else None)
        if other is None:
            named = ", ".join(map(str, others))
            raise KVMagicError(f"a comparison of strategies has a speed-up per strategy: name one of {named}")
        reference, found = self.measurement(REFERENCE, config), self.measurement(other, config)
        if reference is None or found is None:
            return None
        return Pair(reference, found, sequential=self.spec.repeat == "auto")

    def pairs(self) -> list[Pair]:
        """Every configuration's pair (the plain run's), in order."""
        return [p for config in self.configs if (p := self.pair(config)) is not None]

    def only_pair(self, config: Config) -> Pair | None:
        """The reference against the one other strategy at ``config``, where the rows hold just those two (the
        plain run, or ``--cache off,static``): what a note about "the" speed-up reads."""
        return self.pair(config) if len(self._other_strategies()) == 1 else None

    @property
    def speedup(self) -> float:
        """The speed-up of a single configuration's pair (``result.pair(config).speedup`` for a sweep's)."""
        found = self.pair()
        return math.nan if found is None else found.speedup

    @property
    def identical(self) -> bool:
        return all(m.identical for m in self.measurements)

    def steps(self, config: Config | None = None) -> pd.DataFrame:
        """Per-step seconds of each strategy's hooked run (``steps``) at ``config`` (the only one, if none is
        given), indexed by the position of the new token: without the cache it grows, with it it stays flat."""
        import pandas as pd

        config = config or self._only_config()
        found = [m for m in self.measurements if m.config == config and m.profile is not None]
        columns = {f"{self.shown_name(m.strategy)}_s": list(m.profile.step_s) for m in found if m.profile}
        index = pd.RangeIndex(config.prompt_tokens, config.prompt_tokens + config.new_tokens, name="position")
        return pd.DataFrame(columns, index=index)

    def shown_name(self, strategy: Strategy) -> str:
        """How tables and notes name a strategy: the plain run's two as ``uncached`` and ``cached``, the names its
        side-by-side view (report.table, the other place the plain run differs) gives their columns."""
        return PAIR_NAMES.get(strategy, str(strategy)) if self.plain else str(strategy)

    def setup(self) -> dict[str, Any]:
        """How the run was set up, as a reader and a comparison with a baseline need it: the environment, the
        request's settings, the prompt and what the model ships, and what the add-ons it used say of theirs."""
        found = {**self.metadata, **self.spec.recorded(), **self.facts.setup()}
        for addon in addons():
            if (data := self.addons.get(addon.name)) is not None:
                found.update(addon.facts(data))
        return found

    def _only_config(self) -> Config:
        configs = self.configs
        if len(configs) != 1:
            raise KVMagicError(f"this result has {len(configs)} configurations: name one (result.configs lists them)")
        return configs[0]

    def _other_strategies(self) -> list[Strategy]:
        return [s for s in self.strategies if s != REFERENCE]

    def __repr__(self) -> str:
        if len(self._other_strategies()) == 1:
            rows = ", ".join(f"{p.config.prompt_tokens}+{p.config.new_tokens}"
                             f"{f'x{p.config.batch}' if p.config.batch > 1 else ''} tokens: {p.speedup:.2f}x"
                             for p in self.pairs())  # fmt: skip
        else:
            configs, strategies = len(self.configs), ", ".join(map(str, self.strategies))
            rows = f"{configs} configuration{'' if configs == 1 else 's'} x strategies {strategies}"
        partial = "; partial" if self.partial else ""
        return f"<{type(self).__name__} {self.model}: {rows}; identical={self.identical}{partial}>"
