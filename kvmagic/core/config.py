"""A configuration: one (prompt tokens, new tokens, batch) a benchmark measures, with its one label and order.

Every place that matches, compares, sorts or names a configuration uses this type: rows of a result
and of its baseline, an add-on's figures. Pure Python.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

__all__ = ["Config"]


class Config(NamedTuple):
    """``prompt_tokens`` + ``new_tokens``, for each of ``batch`` sequences (the same prompt in every one).

    A named tuple: ordered, hashable, and unpacked as ``prompt_tokens, new_tokens, batch``."""

    prompt_tokens: int
    new_tokens: int
    batch: int = 1

    def __str__(self) -> str:
        """``16+64 tokens``, or ``16+64 tokens x 4 sequences`` for a batch."""
        return f"{self.prompt_tokens}+{self.new_tokens} tokens" + (
            f" x {self.batch} sequences" if self.batch > 1 else ""
        )

    @property
    def cached_positions(self) -> int:
        """Positions a cache holds at the end: every one but the last generated token's (it is never fed back)."""
        return self.prompt_tokens + self.new_tokens - 1

    @classmethod
    def of(cls, record: Any) -> Config:
        """The configuration a record (a row dict, or an object with the three fields) was made for."""
        if isinstance(record, Mapping):
            return cls(record["prompt_tokens"], record["new_tokens"], record.get("batch", 1))
        return cls(record.prompt_tokens, record.new_tokens, getattr(record, "batch", 1))
