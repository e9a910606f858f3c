"""runtime.speculate and speculation in runtime.generate: drafts, adaptive length, the acceptance rule,
greedy identity, the sampled distribution and the cache contract."""
from __future__ import annotations

import collections
import dataclasses

import pytest
import torch

from runtime.api import Sampling
from runtime.config import ModelConfig
from runtime.generate import generate
from runtime.kv_cache import KVCache
from runtime.model import Qwen2Model
from runtime.sampling import processed_probs
from runtime.speculate import DraftLength, PromptLookup, accept, corpus_texts

TINY = ModelConfig(arch="qwen2", vocab_size=512, hidden_size=64, intermediate_size=256, num_layers=2,
                   num_heads=4, num_kv_heads=2, head_dim=16, context_length=256, tie_embeddings=False)
PROMPT = torch.randint(0, 512, (20,), generator=torch.Generator().manual_seed(8)).tolist()


@pytest.fixture(scope="module", params=["fp32", "quant"])
def model(request) -> Qwen2Model:
    m = Qwen2Model.random(TINY, seed=0, fmt=request.param)
    m.test_fmt = request.param
    return m


# --- prompt lookup -------------------------------------------------------------------------------

def test_lookup_drafts_what_followed_the_suffix_earlier():
    look = PromptLookup([1, 2, 3, 4, 5, 9, 9, 1, 2])
    assert look.draft(3) == [3, 4, 5]
    assert look.draft(10) == [3, 4, 5, 9, 9, 1, 2]  # up to the end of the history
    assert PromptLookup([1, 2, 3, 4]).draft(4) == []  # the suffix (3, 4) never occurred before
    assert PromptLookup([7, 7]).draft(4) == [] and look.draft(0) == []


def test_lookup_prefers_the_longest_backward_match_then_the_most_recent():
    # (5, 6) occurs twice; the earlier one is preceded by 4 like the current suffix (4, 5, 6).
    look = PromptLookup([4, 5, 6, 10, 11, 0, 5, 6, 20, 21, 4, 5, 6])
    assert look.draft(2) == [10, 11]
    look = PromptLookup([5, 6, 10, 0, 5, 6, 20, 0, 5, 6])  # equal matches: the most recent wins
    assert look.draft(2) == [20, 0]


def test_lookup_follows_its_source_and_reanchors_after_a_mismatch():
    src = [100, 101, 102, 103, 104, 105, 106]
    look = PromptLookup([1, 2] + src + [50, 51, 52] + [2, 100])  # the model starts copying src
    assert look.draft(3) == [101, 102, 103]
    look.extend([101, 102])  # accepted two, then the model wrote something else
    assert look.anchor == (0, 5)  # still following src (next: 103): it predicted both
    look.extend([51])  # a mismatch drops the anchor; (102, 51) never occurred, so no draft
    assert look.anchor is None and look.draft(3) == []
    look.extend([52, 2])  # (52, 2) occurred: re-anchored on it
    assert look.draft(2) == [100, 101]


def test_corpus_forms_drop_read_line_numbers_and_escape_for_json():
    read = '     1\tdef f():\n     2\t    return "x"\n    10\t'
    assert corpus_texts(read) == ['def f():\n    return "x"\n', 'def f():\\n    return \\"x\\"\\n']
    assert corpus_texts("a\tb\nno numbers") == ["a\tb\nno numbers", "a\\tb\\nno numbers"]


def test_lookup_drafts_from_the_corpus_and_follows_it_across_lines():
    escaped = [10, 11, 99, 12, 13, 99, 14]  # 99: an escaped newline the history's raw text never has
    look = PromptLookup([1, 10, 11, 5, 12, 13, 5, 7, 10, 11], corpus=[escaped])
    assert look.draft(3) == [5, 12, 13]  # history and corpus tie on (10, 11): the history is more recent
    look = PromptLookup([1, 10, 11, 5, 12, 13, 5, 7, 10, 11, 99], corpus=[escaped])
    assert look.draft(4) == [12, 13, 99, 14]  # only the corpus continues (11, 99)
    look.extend([12, 13, 99, 14])
    assert look.anchor is None and look.draft(2) == []  # ran off the end of the corpus sequence


def test_draft_length_grows_shrinks_and_pauses():
    dl = DraftLength(k=4, k_max=12, pause_after=2, pause_steps=3)
    dl.update(4, 4)
    assert dl.next() == 8
    dl.update(8, 8)
    assert dl.next() == 12  # capped
    dl.update(12, 5)
    assert dl.next() == 6  # what was accepted, plus one
    dl.update(6, 0)
    dl.update(1, 0)  # two total misses in a row: pause
    assert [dl.next() for _ in range(4)] == [0, 0, 0, 1]
    dl.update(0, 0)  # nothing drafted: no information
    assert dl.next() == 1


# --- the acceptance rule -------------------------------------------------------------------------

def test_greedy_acceptance_takes_drafts_while_they_are_the_argmax():
    rows = torch.full((4, 8), -5.0)
    for j, t in enumerate([3, 4, 6, 7]):
        rows[j, t] = 5.0
    g = Sampling()
    assert accept(rows, [3, 4, 5], g, None).tokens == [3, 4, 6]  # 5 rejected: the argmax 6 replaces it
    full = accept(rows, [3, 4, 6], g, None)
    assert (full.tokens, full.accepted) == ([3, 4, 6, 7], 3)  # all accepted, plus the bonus token
    stopped = accept(rows, [3, 4, 6], g, None, on_token=lambda t: t != 4)
    assert (stopped.tokens, stopped.accepted) == ([3, 4], 2)


def test_processor_masks_each_row_before_it_is_used():
    rows = torch.zeros(3, 6)
    rows[:, 2] = 1.0
    rows[:, 1] = 0.5
    seen = []

    def mask(logits):
        seen.append(1)
        logits[2] = float("-inf")  # like a grammar forbidding token 2
        return logits

    out = accept(rows, [2, 1], Sampling(), None, process=mask)
    assert out.tokens == [1] and out.accepted == 0 and len(seen) == 1


def test_sampled_acceptance_emits_exactly_the_target_distribution():
    """Point-mass drafts, accepted with p(d), corrections from the residual: the joint of the first two
    emitted tokens equals p0(x) * p1(y) (row 1 is only used when x == draft[0]; otherwise y comes next pass)."""
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 6, generator=g) * 1.5
    s = Sampling(temperature=1.0, top_k=4)
    p = processed_probs(logits, s)
    n = 20000
    first = collections.Counter()
    second_after_draft = collections.Counter()
    gen = torch.Generator().manual_seed(1)
    draft = [int(p[0].argsort()[-2]), 2]  # the second most likely token
    for _ in range(n):
        out = accept(logits.clone(), draft, s, gen)
        first[out.tokens[0]] += 1
        if out.tokens[0] == draft[0]:
            second_after_draft[out.tokens[1]] += 1
    emp = torch.tensor([first[i] / n for i in range(6)])
    assert (emp - p[0]).abs().sum() / 2 < 0.015, (emp, p[0])
    m = sum(second_after_draft.values())
    emp2 = torch.tensor([second_after_draft[i] / m for i in range(6)])
    assert (emp2 - p[1]).abs().sum() / 2 < 0.03, (emp2, p[1])
    assert emp[int(p[0].argmin())] == 0  # filtered by top-k: never emitted


# --- speculation inside generate -------------------------------------------------------------------

def plain(model, prompt, sampling, **kw):
    cache = KVCache(model.config)
    gen = generate(model, cache, prompt, sampling, speculation=False, **kw)
    return list(gen), cache, gen


def test_greedy_speculation_is_token_identical_and_counts_drafts(model):
    # A random model falls into loops, which prompt lookup drafts from its own output.
    greedy = Sampling(max_tokens=60)
    ref, ref_cache, _ = plain(model, PROMPT, greedy)
    cache = KVCache(model.config)
    gen = generate(model, cache, PROMPT, greedy)
    out = list(gen)
    assert out == ref
    assert gen.usage.drafted_tokens > 0 and 0 < gen.usage.accepted_tokens <= gen.usage.drafted_tokens
    assert cache.tokens == PROMPT + out[:-1] == ref_cache.tokens
    n = cache.length
    # K/V written by verify passes match those written one token at a time (the quantized matmuls round
    # blocks of rows slightly differently from single rows: ~3e-3, as incremental vs one-pass prefill).
    tol = 1e-4 if model.test_fmt == "fp32" else 2e-2
    assert (cache.k[:, :, :n] - ref_cache.k[:, :, :n]).abs().max() < tol
    assert (cache.v[:, :, :n] - ref_cache.v[:, :, :n]).abs().max() < tol


def oracle_drafter(prompt, continuation, wrong_every):
    class D:
        calls, pos = 0, 0

        def draft(self, k):
            D.calls += 1
            d = list(continuation[self.pos + 1: self.pos + 1 + k])  # the token after the one being fed
            if d and D.calls % wrong_every == 0:
                d[-1] = (d[-1] + 1) % 512
            return d

        def extend(self, tokens):
            self.pos += len(tokens)
    d = D()
    d.pos = -1  # extend() is first called with the token sampled from the prefill
    return d


@pytest.mark.parametrize("wrong_every", [1, 2, 3])
def test_greedy_with_a_drafter_that_is_sometimes_wrong(model, wrong_every):
    greedy = Sampling(max_tokens=40)
    ref, _, _ = plain(model, PROMPT, greedy)
    cache = KVCache(model.config)
    gen = generate(model, cache, PROMPT, greedy, drafter=oracle_drafter(PROMPT, ref, wrong_every))
    assert list(gen) == ref and cache.tokens == PROMPT + ref[:-1]
    assert gen.usage.accepted_tokens < gen.usage.drafted_tokens  # some drafts were wrong
    assert gen.usage.accepted_tokens > 0


def test_budget_stop_token_and_early_close_inside_one_pass(model):
    greedy = Sampling(max_tokens=40)
    ref, _, _ = plain(model, PROMPT, greedy)
    # max_tokens falls inside a pass: exactly that many tokens, the cache contract holds.
    cache = KVCache(model.config)
    gen = generate(model, cache, PROMPT, dataclasses.replace(greedy, max_tokens=13),
                   drafter=oracle_drafter(PROMPT, ref, 1000))
    assert list(gen) == ref[:13] and gen.stop_reason == "max_tokens" and cache.tokens == PROMPT + ref[:12]
    # A stop token inside an accepted draft ends the turn there.
    stop = ref[9]
    first = ref.index(stop)
    cache = KVCache(model.config)
    gen = generate(model, cache, PROMPT, greedy, stop_ids=(stop,), drafter=oracle_drafter(PROMPT, ref, 1000))
    assert list(gen) == ref[:first + 1] and gen.stop_reason == "stop" and cache.tokens == PROMPT + ref[:first]
    # The consumer leaves in the middle of a pass's tokens: K/V of tokens it never saw are dropped.
    cache = KVCache(model.config)
    it = iter(generate(model, cache, PROMPT, greedy, drafter=oracle_drafter(PROMPT, ref, 1000)))
    got = [next(it) for _ in range(6)]
    it.close()
    assert got == ref[:6] and cache.tokens == PROMPT + got[:5]
    # The next call continues from that cache exactly like a cold run.
    assert list(generate(model, cache, PROMPT + got, greedy, speculation=False)) == \
        plain(model, PROMPT + got, greedy)[0]


def test_speculation_off_uses_no_drafts_and_the_same_random_stream(model):
    s = Sampling(temperature=1.2, seed=5, max_tokens=20)
    a, _, gen = plain(model, PROMPT, s)
    assert gen.usage.drafted_tokens == 0
    assert a == plain(model, PROMPT, s)[0]


def test_sampled_speculation_keeps_the_models_distribution():
    """The joint of the first two tokens, with a drafter that always proposes the same token, against
    the exact probabilities computed from the model."""
    model = Qwen2Model.random(TINY, seed=0, fmt="fp32")
    s = Sampling(temperature=1.0, top_k=3, max_tokens=3)  # room for one drafted token after the first
    cache = KVCache(model.config)
    p1 = processed_probs(model.forward(torch.tensor(PROMPT), torch.arange(len(PROMPT)), cache)[-1], s)
    top = p1.topk(3).indices.tolist()
    exact = {}
    for t1 in top:
        c = KVCache(model.config)
        p2 = processed_probs(model.forward(torch.tensor(PROMPT + [t1]), torch.arange(len(PROMPT) + 1), c)[-1], s)
        for t2 in p2.topk(3).indices.tolist():
            exact[(t1, t2)] = float(p1[t1] * p2[t2])
    # Draft the likeliest second token after the likeliest first: accepted often, rejected often.
    c = KVCache(model.config)
    p2 = processed_probs(model.forward(torch.tensor(PROMPT + [top[0]]), torch.arange(len(PROMPT) + 1), c)[-1], s)
    d = int(p2.argmax())

    class Fixed:
        def draft(self, k):
            return [d]

        def extend(self, tokens):
            pass

    n, counts, drafted = 1000, collections.Counter(), 0
    cache = KVCache(model.config)
    for i in range(n):
        gen = generate(model, cache, PROMPT, dataclasses.replace(s, seed=i), drafter=Fixed())
        counts[tuple(gen)[:2]] += 1
        drafted += gen.usage.drafted_tokens
    assert drafted == n  # every call verified one drafted token after the first
    tv = sum(abs(counts[k] / n - exact.get(k, 0.0)) for k in set(counts) | set(exact)) / 2
    assert tv < 0.08, (tv, counts, exact)  # sampling noise alone: ~0.04 at this n; a wrong rule: > 0.2
