"""KV-cache strategies side by side on one model: the ``%%kvbench --cache`` table, as Markdown.

Every strategy runs in the same process on the same input, interleaved, so the speed-ups against
``off`` and the KV sizes are comparable within one run (not across machines). It also reports how
long the first warm-up of each strategy took against its second: a backend's one-time build shows
up there, and never in the timed columns.

    PYTHONPATH=. python benchmarks/cache_strategies.py [-n 64,256] [-r 3] [--threads T] [--model tiny]
        [--cache off,dynamic,static,offloaded,offloaded_static,quantized:quanto,quantized:hqq,quantized:fp8]
"""

from __future__ import annotations

import argparse
from importlib.metadata import version

import torch

from kvmagic import load_model, run_benchmark
from kvmagic.core.strategy import Strategy, parse_list
from kvmagic.measure.strategies import checked, setups, strategy_config
from kvmagic.measure.timing import timed_generate
from kvmagic.runner.prompt import encode_prompt

PROMPT = "인공지능은 데이터를 학습하여 패턴을 찾는다. 이를 활용하면"
ALL = "off,dynamic,static,offloaded,offloaded_static,quantized:quanto,quantized:hqq,quantized:fp8"


def first_use(loaded, names: list[Strategy]) -> dict[str, tuple[float, float]]:
    """Seconds of each runnable strategy's first and second one-token run, in a fresh process."""
    inputs = encode_prompt(loaded, PROMPT)
    calls = {}
    for strategy in setups(loaded, names):
        if not strategy.reason:
            config = strategy_config(loaded, 1, strategy)
            with strategy.around(loaded.model):
                calls[str(strategy.strategy)] = tuple(
                    timed_generate(loaded.model, inputs, config, loaded.devices)[1] for _ in range(2)
                )
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", default="64,256")
    parser.add_argument("-r", type=int, default=3)
    parser.add_argument("--cache", default=ALL)
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--threads", type=int, help="torch CPU threads; 1 steadies timings on a busy machine")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    loaded = load_model(args.model)
    firsts = first_use(loaded, checked(parse_list(args.cache)))
    result = run_benchmark(loaded, PROMPT, new_tokens=args.n, repeat=args.r, cache=args.cache)
    devices = ", ".join(map(str, loaded.devices))
    print(f"{args.model} on {devices}, transformers {version('transformers')}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} torch threads, -r {args.r}\n")  # fmt: skip
    print(result.to_markdown())
    print("first one-token call / second, per strategy (one-time costs):")
    for name, (first, second) in firsts.items():
        print(f"  {name}: {first:.3f} s / {second:.3f} s")


if __name__ == "__main__":
    main()
