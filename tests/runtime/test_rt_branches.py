"""runtime.branches: N sampled branches decoded together equal N single generations; the caches they leave."""
from __future__ import annotations

import dataclasses
import threading

import pytest
import torch

from runtime.api import Progress, Sampling
from runtime.branches import generate_branches, keep
from runtime.config import ModelConfig
from runtime.generate import generate
from runtime.kv_cache import KVCache
from runtime.model import Qwen2Model

TINY = ModelConfig(arch="qwen2", vocab_size=512, hidden_size=64, intermediate_size=256, num_layers=2,
                   num_heads=4, num_kv_heads=2, head_dim=16, context_length=256,
                   tie_embeddings=False)  # a tied random head makes each token predict itself forever
PROMPT = torch.randint(0, 512, (20,), generator=torch.Generator().manual_seed(8)).tolist()
GREEDY = Sampling(max_tokens=12)
SAMPLED = Sampling(temperature=1.2, top_p=0.95, max_tokens=10)


@pytest.fixture(scope="module", params=["fp32", "quant"])
def model(request) -> Qwen2Model:
    return Qwen2Model.random(TINY, seed=0, fmt=request.param)


def single(model: Qwen2Model, sampling: Sampling, **kw) -> tuple[list[int], KVCache]:
    cache = KVCache(model.config)
    return list(generate(model, cache, PROMPT, sampling, speculation=False, **kw)), cache


def test_greedy_branches_equal_plain_greedy_generation(model):
    cache = KVCache(model.config)
    branches = generate_branches(model, cache, PROMPT, 3, GREEDY)
    plain, plain_cache = single(model, GREEDY)
    assert [(b.tokens, b.finish_reason) for b in branches] == [(plain, "max_tokens")] * 3
    assert cache.tokens == PROMPT  # the caller's cache holds the prompt only
    for b in branches:
        kept = cache.fork()
        keep(kept, b)
        assert kept.tokens == plain_cache.tokens == PROMPT + plain[:-1]  # generate's contract: the last token has no K/V
        torch.testing.assert_close(kept.k[:, :, : kept.length], plain_cache.k[:, :, : kept.length], atol=1e-3, rtol=0)
        torch.testing.assert_close(kept.v[:, :, : kept.length], plain_cache.v[:, :, : kept.length], atol=1e-3, rtol=0)


def test_seeded_branches_equal_single_branch_sampling_with_their_seeds(model):
    branches = generate_branches(model, KVCache(model.config), PROMPT, 4, SAMPLED, seeds=[5, 6, 7, 8])
    expected = [single(model, dataclasses.replace(SAMPLED, seed=s))[0] for s in (5, 6, 7, 8)]
    assert [b.tokens for b in branches] == expected
    assert len({tuple(t) for t in expected}) == 4  # the seeds give different branches
    assert [b.seed for b in branches] == [5, 6, 7, 8]
    # default seeds: sampling.seed + i
    again = generate_branches(model, KVCache(model.config), PROMPT, 2, dataclasses.replace(SAMPLED, seed=7))
    assert [b.tokens for b in again] == expected[2:]


def test_branches_with_the_same_tokens_so_far_share_one_row_of_the_forward(model, monkeypatch):
    widths = []
    forward = model.forward_branches
    monkeypatch.setattr(model, "forward_branches", lambda feed, kv: widths.append(len(feed)) or forward(feed, kv))
    branches = generate_branches(model, KVCache(model.config), PROMPT, 3, GREEDY)
    assert len({tuple(b.tokens) for b in branches}) == 1 and widths == [1] * (GREEDY.max_tokens - 1)

    def forced(tokens, logits):  # every branch writes 7, 8, 9 first, then samples freely
        if len(tokens) < 3:
            logits[:] = float("-inf")
            logits[7 + len(tokens)] = 0.0
        return logits

    widths.clear()
    cache = KVCache(model.config)
    branches = generate_branches(model, cache, PROMPT, 4, SAMPLED, seeds=[5, 6, 7, 8], logits_processors=[forced] * 4)
    assert widths[:3] == [1, 1, 1] and widths[3] > 1 and widths == sorted(widths)  # rows part, never merge
    for b, seed in zip(branches, (5, 6, 7, 8)):
        expected, plain_cache = single(model, dataclasses.replace(SAMPLED, seed=seed), processor=Forced())
        assert b.tokens[:3] == [7, 8, 9] and b.tokens == expected
        kept = cache.fork()
        keep(kept, b)  # a copied row holds the K/V of the tokens its branches shared
        torch.testing.assert_close(kept.k[:, :, : kept.length], plain_cache.k[:, :, : kept.length], atol=1e-3, rtol=0)


class Forced:  # `forced` above in the mask interface that generate takes
    def __init__(self):
        self.n = 0

    def process(self, logits):
        if self.n < 3:
            logits[:] = float("-inf")
            logits[7 + self.n] = 0.0
        return logits

    def accept(self, token):
        self.n += 1


def test_logprob_is_the_sum_of_the_sampled_tokens_log_probabilities(model):
    (b,) = generate_branches(model, KVCache(model.config), PROMPT, 1, SAMPLED, seeds=[3])
    seq = PROMPT + b.tokens
    logits = model.forward(torch.tensor(seq[:-1]), torch.arange(len(seq) - 1), KVCache(model.config))
    logp = torch.log_softmax(logits[len(PROMPT) - 1 :], -1).gather(1, torch.tensor(b.tokens)[:, None])
    assert b.logprob == pytest.approx(float(logp.sum()), abs=0.05)
    assert b.mean_logprob == pytest.approx(b.logprob / 10)


def test_stopped_branches_drop_out_and_the_rest_go_on(model):
    seeds = [1, 2, 3, 4]
    free = generate_branches(model, KVCache(model.config), PROMPT, 4, SAMPLED, seeds=seeds)
    stop = free[1].tokens[2]
    branches = generate_branches(model, KVCache(model.config), PROMPT, 4, SAMPLED, 6, {stop}, seeds=seeds)
    for b, f in zip(branches, free):
        cut = f.tokens.index(stop) + 1 if stop in f.tokens[:6] else 6
        assert (b.tokens, b.finish_reason) == (f.tokens[:cut], "stop" if stop in f.tokens[:6] else "max_tokens")
        assert (b.start, b.k.shape[2], b.v.shape[2]) == (len(PROMPT), len(b.tokens) - 1, len(b.tokens) - 1)
    assert len(branches[1].tokens) == 3 and {b.finish_reason for b in branches} == {"stop", "max_tokens"}


def test_each_branch_has_its_own_processor(model):
    class Odd:  # the mask interface of constrained decoding: process, then accept
        def __init__(self):
            self.accepted = []

        def process(self, logits):
            logits[0::2] = float("-inf")
            return logits

        def accept(self, token):
            self.accepted.append(token)

    def below_100(tokens, logits):  # the function form: (the branch's tokens so far, logits)
        seen.append(list(tokens))
        logits[100:] = float("-inf")
        return logits

    class Looping(Odd):  # runtime.constrain's guard: a call's text became a loop
        runaway = None

        def accept(self, token):
            super().accept(token)
            self.runaway = "loop" if len(self.accepted) == 3 else None

    odd, seen = Odd(), []
    a, b, c, d = generate_branches(model, KVCache(model.config), PROMPT, 4, SAMPLED, 5, seeds=[1, 2, 3, 4],
                                   logits_processors=[odd, below_100, None, Looping()])
    assert odd.accepted == a.tokens and all(t % 2 for t in a.tokens)
    assert (len(d.tokens), d.finish_reason, a.finish_reason) == (3, "runaway", "max_tokens")
    assert seen == [b.tokens[:i] for i in range(5)] and all(t < 100 for t in b.tokens)
    assert c.tokens == generate_branches(model, KVCache(model.config), PROMPT, 1, SAMPLED, 5, seeds=[3])[0].tokens
    expected, _ = single(model, dataclasses.replace(SAMPLED, seed=1, max_tokens=5), processor=Odd())
    assert a.tokens == expected  # a processed branch still equals generate with that processor


def test_prefix_reuse_and_keeping_the_winner(model):
    cache, events = KVCache(model.config), []
    generate_branches(model, cache, PROMPT, 2, SAMPLED, seeds=[1, 2])
    turn2 = PROMPT + [5, 6, 7]
    branches = generate_branches(model, cache, turn2, 2, SAMPLED, seeds=[1, 2], on_progress=events.append)
    assert events == [Progress("prefill", 3, 3)]  # the cache held the whole first prompt: only the new tokens
    assert cache.tokens == turn2
    winner = branches[1]
    keep(cache, winner)  # copies only the winner's own positions
    assert cache.tokens == turn2 + winner.tokens[:-1]
    torch.testing.assert_close(cache.k[:, :, len(turn2) : cache.length], winner.k, atol=0, rtol=0)
    gen = generate(model, cache, turn2 + winner.tokens + [9], GREEDY)  # the next turn goes on from the winner
    assert list(gen) == list(generate(model, KVCache(model.config), turn2 + winner.tokens + [9], GREEDY))
    assert gen.usage.prefilled_tokens == 2


def test_cancel_stops_every_branch_between_steps(model):
    cancel = threading.Event()

    def cancel_at_3(tokens, logits):
        if len(tokens) == 3:
            cancel.set()
        return logits

    cache = KVCache(model.config)
    branches = generate_branches(model, cache, PROMPT, 2, SAMPLED, seeds=[1, 2], cancel=cancel,
                                 logits_processors=[cancel_at_3, None])
    assert [(len(b.tokens), b.finish_reason) for b in branches] == [(4, "cancelled"), (4, "cancelled")]
    assert [b.k.shape[2] for b in branches] == [3, 3]
    assert cache.tokens == PROMPT
    before = generate_branches(model, KVCache(model.config), PROMPT, 2, SAMPLED, cancel=cancel)  # set before prefill
    assert [(b.tokens, b.finish_reason) for b in before] == [([], "cancelled")] * 2


def test_context_full_ends_branches():
    config = dataclasses.replace(TINY, context_length=24)
    model = Qwen2Model.random(config, seed=0)
    branches = generate_branches(model, KVCache(config), PROMPT, 2, SAMPLED, seeds=[1, 2])  # room to feed 4 more
    assert [(len(b.tokens), b.finish_reason) for b in branches] == [(5, "context_full")] * 2
    assert [b.k.shape[2] for b in branches] == [4, 4]  # positions 20..23: the context is full
    full = generate_branches(model, KVCache(config), PROMPT + [1, 2, 3, 4], 2, SAMPLED)
    assert [(b.tokens, b.finish_reason) for b in full] == [([], "context_full")] * 2
