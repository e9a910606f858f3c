"""Candidate replies for verified tries: N continuations of one prompt decoded together (runtime.branches), as text.

The engine builds the prompt as for `stream`, prefills it once and samples the branches; a stop string ends a
branch (its processor then allows only the end-of-turn token). Nothing enters the session's history: the caller
checks the candidates and sends the winner back as an ordinary message.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import torch


@dataclass
class Candidate:
    text: str  # the reply's text (the reply prefix not included)
    tokens: int  # generated tokens
    mean_logprob: float  # mean log-probability of its tokens, for ranking
    finish_reason: str  # "stop" | "max_tokens" | "context_full" | "cancelled"


class StopStrings:
    """A branch processor: once the branch's text contains a stop string, only `end_id` may follow."""

    def __init__(self, stops: list[str], decoder, end_id: int) -> None:
        self.stops, self.decoder, self.end_id = stops, decoder, end_id
        self.text, self.seen = "", 0

    def __call__(self, tokens: list[int], logits: torch.Tensor) -> torch.Tensor:
        for token in tokens[self.seen:]:
            self.text += self.decoder.feed(token)
        self.seen = len(tokens)
        if any(s in self.text for s in self.stops):
            out = torch.full_like(logits, float("-inf"))
            out[self.end_id] = 0.0
            return out
        return logits


class SampleMemo:
    """The candidates of recent `sample` calls by what fixes them (prompt tokens, n, sampling and its seed, greedy
    count, stop strings): a pipeline that asks the same again (a focused round on the same file) gets the same
    replies without decoding them. Cancelled sets are not kept."""

    def __init__(self, size: int = 8) -> None:
        self.size, self.entries = size, OrderedDict()

    def get(self, key: tuple) -> list[Candidate] | None:
        found = self.entries.get(key)
        if found is not None:
            self.entries.move_to_end(key)
        return None if found is None else list(found)

    def put(self, key: tuple, candidates: list[Candidate]) -> None:
        if any(c.finish_reason == "cancelled" for c in candidates):
            return
        self.entries[key] = list(candidates)
        self.entries.move_to_end(key)
        while len(self.entries) > self.size:
            self.entries.popitem(last=False)

