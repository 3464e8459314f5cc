"""Quality, bytes held and decode speed per cache strategy, on a model whose predictions mean something.

No trained causal LM can be fetched here (no model hub), and on random weights the next-token distributions
are near uniform, so a cache's KL against the full cache says how far it moves the logits, not what a
model loses. This script trains one: a 4-layer Llama shape (about 3 M parameters) with tiny's byte-level
tokenizer, on the Python reference documentation that ships with every CPython (``pydoc_data/topics.py``,
about 750 KB of English), for a few minutes on one CPU core. It is saved once under ``$KVMAGIC_CACHE``
(``trained-llama``) and reused. Then ``--cache`` compares the strategies on a held-out passage of that text,
with quality read along the full cache's greedy continuation and along the passage's real next words
(``quality_text``), and prints a markdown table of each method and ratio.

    PYTHONPATH=. python benchmarks/trained_quality.py [--steps 900] [--cache LIST] [--new-tokens 64]

kvpress's methods need the ``press`` extra (its own venv: transformers 5.2); without it their rows say so.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from pathlib import Path
from typing import Any

CACHE = (
    "off,dynamic,quantized:quanto,quantized:hqq,quantized:fp8,"
    "press:snapkv:0.25-0.75+0.25,press:streaming_llm:0.25-0.75+0.25,press:knorm:0.25-0.75+0.25"
)
BLOCK, BATCH, SEED = 256, 16, 0


def corpus() -> str:
    """The Python reference's topics, as text: held-out passages come from its last tenth."""
    import pydoc_data.topics

    return "\n\n".join(str(text) for text in pydoc_data.topics.topics.values())


def model_dir() -> Path:
    from kvmagic.model.tiny import cache_root

    return cache_root() / "trained-llama"


def train(steps: int, path: Path) -> None:
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from kvmagic.model.tiny import tiny_dir

    torch.manual_seed(SEED)
    tokenizer = AutoTokenizer.from_pretrained(tiny_dir())
    text = corpus()
    ids = torch.tensor(tokenizer(text[: int(len(text) * 0.9)], add_special_tokens=False)["input_ids"])
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=256, intermediate_size=704, num_hidden_layers=4,
        num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=2048, tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    model = LlamaForCausalLM(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)
    started = time.perf_counter()
    for step in range(steps):
        starts = torch.randint(0, len(ids) - BLOCK - 1, (BATCH,))
        batch = torch.stack([ids[s : s + BLOCK] for s in starts])
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step(), schedule.step(), optimizer.zero_grad()
        if step % 100 == 0 or step == steps - 1:
            print(f"step {step}: loss {loss.item():.3f} nats/token ({time.perf_counter() - started:.0f} s)", flush=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)


def held_out(tokenizer: Any, prompt_tokens: int, text_tokens: int) -> tuple[str, str]:
    """A passage from the text the model never trained on: its first part as the prompt, the rest to force."""
    text = corpus()
    ids = tokenizer(text[int(len(text) * 0.9) :], add_special_tokens=False)["input_ids"]
    start = 1000
    prompt = tokenizer.decode(ids[start : start + prompt_tokens])
    return prompt, tokenizer.decode(ids[start + prompt_tokens : start + prompt_tokens + text_tokens])


def table(result: Any) -> str:
    from kvmagic.results.serialize import markdown_table

    frame = result.to_dataframe()
    wanted = ["strategy", "seconds", "tok_s", "kv_cache_mib", "kv_promised_mib", "top1_agreement", "kl_nats",
              "ppl_ratio", "identical", "note"]  # fmt: skip
    frame = frame[[c for c in wanted if c in frame.columns]]
    shown = frame.apply(lambda column: column.map(lambda v: f"{v:.4g}" if isinstance(v, float) else v))
    return markdown_table(shown)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=900)
    parser.add_argument("--cache", default=CACHE)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    from kvmagic import load_model, run_benchmark

    torch.set_num_threads(1)
    path = model_dir()
    if not (path / "config.json").exists():
        train(args.steps, path)
    loaded = load_model(str(path), dtype="float32")
    print(loaded.summary())
    prompt, following = held_out(loaded.tokenizer, args.prompt_tokens, args.new_tokens)
    for along, text in (("the full cache's greedy tokens", None), ("the passage's own next tokens", following)):
        result = run_benchmark(
            loaded, prompt, new_tokens=args.new_tokens, warmup_tokens=2, repeat=args.repeat, cache=args.cache,
            quality_text=text, max_seconds=0,
        )  # fmt: skip
        print(f"\n{result.config}, quality along {along}:\n")
        print(table(result))
    print(f"\nperplexity of the held-out passage under the full cache: {_perplexity(loaded, prompt, following):.3g}")


def _perplexity(loaded: Any, prompt: str, following: str) -> float:
    import torch

    tokenizer = loaded.tokenizer
    head = tokenizer(prompt, return_tensors="pt")["input_ids"]
    tail = tokenizer(following, add_special_tokens=False, return_tensors="pt")["input_ids"]
    ids = torch.cat([head, tail], dim=1)
    with torch.inference_mode():
        logits = loaded.model(ids).logits[0, head.shape[1] - 1 : -1].float()
    nll = torch.nn.functional.cross_entropy(logits, tail[0])
    return math.exp(nll.item())


if __name__ == "__main__":
    main()
