"""The seed's lesson on one machine: the KV cache's speed-up grows with the generated length.

Run: ``python benchmarks/sweep_lengths.py [MODEL] [LENGTHS]`` (default ``tiny`` and ``16,64,256``).
Both strategies are measured side by side in one sweep, so the ratios compare like with like.
"""

from __future__ import annotations

import sys

from kvmagic import load_model, run_benchmark

PROMPT = "인공지능은 데이터를 학습하여 패턴을 찾는다. 이를 활용하면"  # the source experiment's prompt


def main(model: str = "tiny", lengths: str = "16,64,256") -> None:
    loaded = load_model(model)
    print(loaded.summary())
    result = run_benchmark(loaded, PROMPT, new_tokens=lengths, progress=True)
    print(result.to_markdown())


if __name__ == "__main__":
    main(*sys.argv[1:])
