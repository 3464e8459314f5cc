"""``%kvload`` against a bare ``from_pretrained`` of tokenizer and model, interleaved in one process.

The bare side is the source experiment's loading code (same dtype, ``device_map="auto"``) on the
same directory. Before each timed load, the previous model is dropped and collected outside the
timed region on both sides: prints %kvload/bare as a ratio of medians; target <= 1.05.
It also times %kvload replacing a model that is still loaded: then %kvload itself frees the old
model (a full garbage collection) before the new weights take memory, and that cost is printed apart.

    PYTHONPATH=. python benchmarks/load_cost.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import statistics
from time import perf_counter

from IPython.core.interactiveshell import InteractiveShell

from kvmagic.measure.capabilities import dtype_keyword
from kvmagic.model.loading import resolve_dtype
from kvmagic.model.tiny import tiny_dir


def bare_load() -> float:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gc.collect()  # the last round's model, freed outside the timed region
    start = perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(tiny_dir())
    dtype = {dtype_keyword(): resolve_dtype("auto")}
    model = AutoModelForCausalLM.from_pretrained(tiny_dir(), device_map="auto", **dtype)
    elapsed = perf_counter() - start
    del tokenizer, model
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "kvmagic")

    magics = shell.magics_manager.registry["KVMagics"]

    def kvload(replace: bool = False) -> float:
        if not replace:
            magics.unload()
        start = perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            shell.run_line_magic("kvload", "tiny")
        return perf_counter() - start

    kvload(), bare_load()  # build tiny if needed; import everything once
    times: dict[str, list[float]] = {"kvload": [], "bare": [], "replace": []}
    for index in range(args.rounds):
        order = [("kvload", kvload), ("bare", bare_load)]
        for name, load in order if index % 2 == 0 else reversed(order):
            times[name].append(load())
        times["replace"].append(kvload(replace=True))
    ours, bare, replace = (statistics.median(times[name]) for name in ("kvload", "bare", "replace"))
    print(f"tiny, {args.rounds} rounds: %kvload {ours:.3f} s, bare from_pretrained {bare:.3f} s")
    print(f"%kvload/bare = {ours / bare:.3f}")
    print(f"%kvload replacing a loaded model: {replace:.3f} s ({replace / bare:.3f} x bare; freeing the old one)")


if __name__ == "__main__":
    main()
