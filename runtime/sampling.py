"""Token sampling from logits: greedy, temperature, top-k, top-p, seeded (runtime.api.Sampling)."""
from __future__ import annotations

import torch

from runtime.api import Sampling

NUCLEUS_CANDIDATES = (64, 1024)  # top_p looks for its nucleus among the 64 most likely tokens, then 1024, then all


def make_generator(sampling: Sampling) -> torch.Generator:
    """A generator for one call: seeded when sampling.seed is set, else from fresh entropy."""
    g = torch.Generator()
    if sampling.seed is None:
        g.seed()
    else:
        g.manual_seed(sampling.seed)
    return g


def processed_probs(logits: torch.Tensor, sampling: Sampling) -> torch.Tensor:
    """The distribution sampling draws from: (..., vocab) logits -> probabilities of the same shape.

    Greedy (temperature 0) is one-hot at the argmax. Otherwise temperature, then top-k, then
    top-p (the smallest set of most likely tokens whose mass reaches top_p), renormalized.
    Speculative acceptance compares these distributions, so they must be exactly what `sample` uses.
    """
    logits = logits.to(torch.float32)
    if sampling.temperature == 0:
        return torch.zeros_like(logits).scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
    logits = logits / sampling.temperature
    if 0 < sampling.top_k < logits.shape[-1]:
        kth = logits.topk(sampling.top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if sampling.top_p < 1.0:
        # The most likely few first (a full sort of a 150k vocabulary costs ~20 ms): when they hold more than top_p,
        # every token past them is out of the nucleus anyway, so the result is the full sort's.
        for k in NUCLEUS_CANDIDATES:
            if k < probs.shape[-1]:
                sorted_probs, order = probs.topk(k, dim=-1)
                if bool((sorted_probs.sum(-1) > sampling.top_p + 1e-4).all()):
                    break
        else:
            sorted_probs, order = probs.sort(dim=-1, descending=True)
        mass_before = sorted_probs.cumsum(-1) - sorted_probs  # mass of strictly more likely tokens
        sorted_probs = sorted_probs.masked_fill(mass_before >= sampling.top_p, 0.0)  # the first token always stays
        probs = torch.zeros_like(probs).scatter_(-1, order, sorted_probs)
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


def sample(logits: torch.Tensor, sampling: Sampling, generator: torch.Generator | None = None) -> int:
    """One token id from (vocab,) logits."""
    assert logits.dim() == 1, logits.shape
    if sampling.temperature == 0:
        return int(logits.argmax())
    return draw(processed_probs(logits, sampling), generator)


def draw(probs: torch.Tensor, generator: torch.Generator | None = None) -> int:
    """One index drawn from (vocab,) weights (>= 0, not all 0; need not sum to 1): the inverse of their CDF at one
    uniform number. A zero weight is never drawn. (torch.multinomial takes milliseconds over a 150k vocabulary.)"""
    cdf = probs.double().cumsum(0)
    x = float(torch.rand((), generator=generator, dtype=torch.float64)) * float(cdf[-1])
    i = int(torch.searchsorted(cdf, torch.tensor([x], dtype=torch.float64), right=True))  # the first cdf[i] > x
    return i if i < len(cdf) else int(probs.nonzero()[-1])  # x rounded up to the total
