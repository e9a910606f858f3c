"""runtime.sampling: greedy, temperature, top-k, top-p, seeds, and the processed distribution."""
from __future__ import annotations

import math

import torch

from runtime.api import Sampling
from runtime.sampling import draw, make_generator, processed_probs, sample

# A known distribution over 6 tokens: p = [0.4, 0.3, 0.15, 0.1, 0.05, 0.0 (practically)]
P = torch.tensor([0.4, 0.3, 0.15, 0.1, 0.05, 1e-12])
LOGITS = P.log()


def frequencies(sampling: Sampling, n: int = 4000) -> torch.Tensor:
    g = make_generator(sampling)
    counts = torch.bincount(torch.tensor([sample(LOGITS, sampling, g) for _ in range(n)]), minlength=6)
    return counts / n


def test_greedy_is_argmax_and_a_one_hot_distribution():
    logits = torch.randn(1000, generator=torch.Generator().manual_seed(0))
    assert sample(logits, Sampling()) == int(logits.argmax())
    probs = processed_probs(logits, Sampling())
    assert probs.sum() == 1 and probs[int(logits.argmax())] == 1


def test_temperature_one_keeps_the_distribution_and_sampling_follows_it():
    torch.testing.assert_close(processed_probs(LOGITS, Sampling(temperature=1.0)), P, atol=1e-6, rtol=0)
    freq = frequencies(Sampling(temperature=1.0, seed=1))
    assert float((freq - P).abs().max()) < 0.03  # 4000 draws: standard error <= 0.008


def test_temperature_sharpens_and_flattens():
    cold = processed_probs(LOGITS, Sampling(temperature=0.5))
    hot = processed_probs(LOGITS, Sampling(temperature=2.0))
    torch.testing.assert_close(cold, P**2 / (P**2).sum(), atol=1e-6, rtol=0)
    torch.testing.assert_close(hot, P.sqrt() / P.sqrt().sum(), atol=1e-6, rtol=0)


def test_top_k_restricts_the_support():
    probs = processed_probs(LOGITS, Sampling(temperature=1.0, top_k=2))
    torch.testing.assert_close(probs, torch.tensor([0.4, 0.3, 0, 0, 0, 0]) / 0.7, atol=1e-6, rtol=0)
    assert set(frequencies(Sampling(temperature=1.0, top_k=2, seed=2)).nonzero().flatten().tolist()) == {0, 1}


def test_top_p_keeps_the_smallest_set_reaching_p():
    # 0.4 + 0.3 = 0.7 < 0.75, so the third token (0.15) is needed; the fourth is not.
    probs = processed_probs(LOGITS, Sampling(temperature=1.0, top_p=0.75))
    torch.testing.assert_close(probs, torch.tensor([0.4, 0.3, 0.15, 0, 0, 0]) / 0.85, atol=1e-6, rtol=0)
    assert set(frequencies(Sampling(temperature=1.0, top_p=0.75, seed=3)).nonzero().flatten().tolist()) == {0, 1, 2}
    # A tiny top_p still keeps the most likely token.
    assert processed_probs(LOGITS, Sampling(temperature=1.0, top_p=0.01)).tolist() == [1, 0, 0, 0, 0, 0]


def test_top_k_then_top_p_batched_rows():
    rows = torch.stack([LOGITS, LOGITS.flip(0)])
    probs = processed_probs(rows, Sampling(temperature=1.0, top_k=3, top_p=0.6))
    # top-k 3 renormalizes to [0.4, 0.3, 0.15] / 0.85 = [0.47, 0.35, 0.18]; top-p 0.6 then needs two tokens
    expected = torch.tensor([0.4, 0.3, 0, 0, 0, 0]) / 0.7
    torch.testing.assert_close(probs, torch.stack([expected, expected.flip(0)]), atol=1e-6, rtol=0)


def test_seeded_sampling_is_reproducible_and_seeds_differ():
    logits = torch.randn(5000, generator=torch.Generator().manual_seed(0))
    s = Sampling(temperature=1.0, seed=42)

    def draws(sampling):
        g = make_generator(sampling)
        return [sample(logits, sampling, g) for _ in range(20)]

    assert draws(s) == draws(s)
    assert draws(s) != draws(Sampling(temperature=1.0, seed=43))
    assert not math.isnan(processed_probs(logits, Sampling(temperature=0.7, top_p=0.9)).sum())


def test_top_p_over_a_large_vocabulary_equals_the_full_sort():
    """The nucleus is looked for among the most likely tokens first; the result is the full sort's, to the bit."""
    def full_sort(probs: torch.Tensor, top_p: float) -> torch.Tensor:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        sorted_probs = sorted_probs.masked_fill(sorted_probs.cumsum(-1) - sorted_probs >= top_p, 0.0)
        out = torch.zeros_like(probs).scatter_(-1, order, sorted_probs)
        return out / out.sum(-1, keepdim=True)

    g = torch.Generator().manual_seed(0)
    for scale, t in ((8.0, 0.7), (3.0, 1.0), (0.5, 1.0)):  # the nucleus within 64 tokens, within 1024, beyond
        logits = torch.randn(2, 150_000, generator=g) * scale
        s = Sampling(temperature=t, top_p=0.9)
        expected = full_sort(torch.softmax(logits / t, -1), 0.9)
        assert torch.equal(processed_probs(logits, s), expected)
    assert [int((expected[0] > 0).sum()) > 1024, int((processed_probs(logits * 16, s)[0] > 0).sum()) <= 64] == [True, True]


def test_draw_never_picks_a_zero_weight_and_follows_the_weights():
    g = torch.Generator().manual_seed(0)
    assert {draw(torch.tensor([0.0, 2.0, 0.0, 0.0]), g) for _ in range(50)} == {1}
    counts = torch.bincount(torch.tensor([draw(torch.tensor([0.0, 1.0, 3.0, 0.0]), g) for _ in range(4000)]), minlength=4)
    assert counts[0] == counts[3] == 0 and abs(float(counts[2]) / 4000 - 0.75) < 0.03
