"""How fast generation could be at best on this hardware: the fewest bytes and FLOPs each step needs.

A step takes at least the longer of two times: the bytes it must move at the device's memory
bandwidth, and the FLOPs it must do at its matrix throughput. Summed over a ``generate``'s steps,
this is each strategy's limit, the least time it can take, so a measured time divided into the limit
says how much of the hardware a run uses, and the larger of the two times says what would make it faster.

Counted per step, for ``B`` sequences (weights once, everything else per sequence); ``c(L)`` is the
positions a query at ``L`` attends to, summed over layers (a layer with window W holds min(L, W)):

- matmuls: 2 FLOPs per parameter per token (attention projections and MLP of every layer), plus the
  LM head for one position per forward (``generate`` asks for the last logits only);
- attention: QK^T and AV, 4 x heads x head_dim FLOPs per attended position; an uncached forward over
  L tokens computes only the causal triangle, sum over i <= L of c(i) (kernels that compute the full
  square and mask it do up to twice that: the limit does not count it);
- bytes: the weights once (an untied input embedding is only gathered, so it is not counted), the
  residual stream written by each layer and read by the next (2 x layers x hidden x dtype per
  token), and for a cached step the keys and values it attends to (c(L) x 2 x kv_heads x head_dim x
  dtype); the prefill writes those of the prompt.

Pure Python, checkable by hand; ``Hardware`` is measured by kvmagic.addons.limits.limits_probe.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from kvmagic.core.config import Config
from kvmagic.core.shape import ModelShape

__all__ = [
    "COMPUTE",
    "MEMORY",
    "Hardware",
    "Limits",
    "Step",
    "StrategyLimit",
    "compute_bound_from",
    "decode_step",
    "forward_step",
    "limits_for",
    "limits_note",
    "prefill_step",
]  # fmt: skip

MEMORY, COMPUTE = "memory", "compute"
_SEARCH_LIMIT = 1 << 24  # longest forward searched for the compute-bound length


@dataclass(frozen=True)
class Hardware:
    """What a device reaches at best: copy bandwidth (bytes read + written per second) and matmul FLOP/s."""

    bandwidth_bytes_s: float
    flops_s: float
    device: str = ""
    dtype: str = ""
    probe_s: float = 0.0

    def describe(self) -> str:
        return (
            f"{self.device} {self.dtype}: {self.bandwidth_bytes_s / 1e9:.1f} GB/s copy bandwidth, "
            f"{self.flops_s / 1e9:.1f} GFLOP/s matmul"
        )


@dataclass(frozen=True)
class Step:
    """One forward's least traffic (bytes read + written) and arithmetic (FLOPs)."""

    bytes: float
    flops: float

    def memory_s(self, hardware: Hardware) -> float:
        return self.bytes / hardware.bandwidth_bytes_s

    def compute_s(self, hardware: Hardware) -> float:
        return self.flops / hardware.flops_s

    def seconds(self, hardware: Hardware) -> float:
        return max(self.memory_s(hardware), self.compute_s(hardware))

    def bound(self, hardware: Hardware) -> str:
        return COMPUTE if self.compute_s(hardware) > self.memory_s(hardware) else MEMORY


def _residual_bytes(shape: ModelShape, tokens: int) -> int:
    return 2 * shape.layers * shape.hidden * shape.dtype_bytes * tokens


def _logit_flops(shape: ModelShape) -> int:
    return 2 * shape.hidden * shape.vocab


def forward_step(shape: ModelShape, length: int, batch: int = 1) -> Step:
    """An uncached forward over ``length`` tokens (every step of uncached generation)."""
    flops = 2 * length * shape.matmul_params + 4 * shape.heads * shape.head_dim * shape.attended(length)
    return Step(
        bytes=shape.weights_read + batch * _residual_bytes(shape, length),
        flops=batch * (flops + _logit_flops(shape)),
    )


def prefill_step(shape: ModelShape, length: int, batch: int = 1) -> Step:
    """The cached strategy's first step: the same forward, writing the prompt's keys and values."""
    step = forward_step(shape, length, batch)
    return Step(step.bytes + batch * shape.kv_bytes_per_position * shape.positions(length), step.flops)


def decode_step(shape: ModelShape, context: int, batch: int = 1) -> Step:
    """A cached step whose new token sees ``context`` positions (itself included)."""
    held = shape.positions(context)
    return Step(
        bytes=shape.weights_read + batch * (_residual_bytes(shape, 1) + shape.kv_bytes_per_position * held),
        flops=batch * (2 * shape.matmul_params + 4 * shape.heads * shape.head_dim * held + _logit_flops(shape)),
    )


@dataclass(frozen=True)
class StrategyLimit:
    """One strategy's ``generate`` at the hardware's limit."""

    seconds: float  # the whole generate
    first_token_s: float  # its first step: the prompt's forward
    memory_s: float  # each step's memory time, summed
    compute_s: float  # each step's compute time, summed
    governs: str  # memory or compute: the one that takes most of the time of the steps after the first (or the only)
    new_tokens: int

    @property
    def decode_tok_s(self) -> float:
        """Tokens after the first per second of decoding, as the measured ``tok_s`` columns count them."""
        decoding = self.seconds - self.first_token_s
        return (self.new_tokens - 1) / decoding if self.new_tokens > 1 and decoding > 0 else math.nan

    def reached(self, measured_s: float) -> float:
        """Share of the limit a measured run reaches: 0.62 = 62% of what the hardware allows."""
        return self.seconds / measured_s


def _strategy_limit(steps: Sequence[Step], hardware: Hardware) -> StrategyLimit:
    times = [step.seconds(hardware) for step in steps]
    later = list(zip(steps[1:], times[1:], strict=True)) or [(steps[0], times[0])]
    memory_time = sum(t for step, t in later if step.bound(hardware) == MEMORY)
    return StrategyLimit(
        seconds=sum(times),
        first_token_s=times[0],
        memory_s=sum(step.memory_s(hardware) for step in steps),
        compute_s=sum(step.compute_s(hardware) for step in steps),
        governs=MEMORY if memory_time >= sum(t for _, t in later) / 2 else COMPUTE,
        new_tokens=len(steps),
    )


@dataclass(frozen=True)
class Limits:
    """Both strategies of one configuration at the hardware's limit."""

    prompt_tokens: int
    new_tokens: int
    batch: int
    uncached: StrategyLimit
    cached: StrategyLimit
    compute_bound_from: int | None  # shortest uncached forward that is compute-bound; None: none up to 2^24
    weights_share: float  # of the last cached step's bytes, the weights' share (the rest: KV cache, activations)

    @property
    def config(self) -> Config:
        return Config(self.prompt_tokens, self.new_tokens, self.batch)

    @property
    def speedup(self) -> float:
        """The speed-up with each strategy at its limit: the uncached limit's seconds / the cached limit's. Not a
        ceiling on the measured one, which is this times the cached run's share of its limit over the uncached's."""
        return self.uncached.seconds / self.cached.seconds


def compute_bound_from(shape: ModelShape, hardware: Hardware, batch: int = 1) -> int | None:
    """Shortest uncached forward whose arithmetic outlasts its traffic.

    A forward's FLOPs per byte grow with its length (FLOPs by at least 2 x params per token, bytes by
    the residual stream only), so a bisection finds the one crossing.
    """

    def computes(length: int) -> bool:
        return forward_step(shape, length, batch).bound(hardware) == COMPUTE

    if not computes(_SEARCH_LIMIT):
        return None
    low, high = 0, _SEARCH_LIMIT  # computes(high); low is not compute-bound (a forward has >= 1 token)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if computes(middle) else (middle, high)
    return high


def limits_for(shape: ModelShape, hardware: Hardware, prompt_tokens: int, new_tokens: int, batch: int = 1) -> Limits:
    """The least seconds greedy ``generate`` of ``new_tokens`` after ``prompt_tokens`` can take, cache off and on.

    Uncached step i (0-based) is a forward over prompt + i tokens; cached step 0 the prefill of the
    prompt, step i >= 1 a decode step whose token sees prompt + i positions.
    """
    if prompt_tokens < 1 or new_tokens < 1 or batch < 1:
        raise ValueError("prompt_tokens, new_tokens and batch must be at least 1")
    uncached = [forward_step(shape, prompt_tokens + i, batch) for i in range(new_tokens)]
    cached = [prefill_step(shape, prompt_tokens, batch)]
    cached += [decode_step(shape, prompt_tokens + i, batch) for i in range(1, new_tokens)]
    return Limits(
        prompt_tokens=prompt_tokens,
        new_tokens=new_tokens,
        batch=batch,
        uncached=_strategy_limit(uncached, hardware),
        cached=_strategy_limit(cached, hardware),
        compute_bound_from=compute_bound_from(shape, hardware, batch),
        weights_share=shape.weights_read / cached[-1].bytes,
    )


def limits_note(limits: Limits, uncached_s: float | None = None, cached_s: float | None = None) -> str:
    """What limits each strategy and what would help; with measured seconds, the share of its limit each runs at."""
    parts = [_cached_clause(limits), _uncached_clause(limits)]
    reached = [
        f"{name} runs at {strategy.reached(seconds):.0%} of what {_resource(strategy.governs)} allows"
        for name, strategy, seconds in (("cached", limits.cached, cached_s), ("uncached", limits.uncached, uncached_s))
        if seconds
    ]
    if reached:
        parts.append(" and ".join(reached))
    return "; ".join(parts)


def _resource(bound: str) -> str:
    return "memory bandwidth" if bound == MEMORY else "matrix throughput"


def _cached_clause(limits: Limits) -> str:
    if limits.cached.governs == COMPUTE:
        return f"cached decode is compute-bound at batch {limits.batch}: only faster arithmetic would help"
    if limits.weights_share >= 0.5:
        help_ = "a smaller dtype would help most, or a larger batch that shares each read of the weights"
    else:
        help_ = "a quantized cache would help most"
    return f"cached decode is memory-bound (weights are {limits.weights_share:.0%} of each step's bytes): {help_}"


def _uncached_clause(limits: Limits) -> str:
    start = limits.compute_bound_from
    if start is None:
        return "uncached stays memory-bound at every length"
    if start <= limits.prompt_tokens:
        return f"uncached is compute-bound from {start} tokens on (every step of this run)"
    return f"uncached is compute-bound from {start} tokens on"
