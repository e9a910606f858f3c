"""runtime.generate: the loop over (model, cache) - reuse, cancel, stops, usage, the cache contract."""
from __future__ import annotations

import dataclasses
import threading

import pytest
import torch

from runtime.api import Progress, Sampling
from runtime.config import ModelConfig
from runtime.generate import generate
from runtime.kv_cache import KVCache
from runtime.model import Qwen2Model

TINY = ModelConfig(arch="qwen2", vocab_size=512, hidden_size=64, intermediate_size=256, num_layers=2,
                   num_heads=4, num_kv_heads=2, head_dim=16, context_length=256,
                   tie_embeddings=False)  # a tied random head makes each token predict itself forever
GREEDY = Sampling(max_tokens=12)
# Greedy runs from this prompt have top-1/top-2 logit gaps >= 0.1, far above the ~3e-3 by which the
# quantized model's incremental and from-scratch logits differ, so token comparisons are robust.
PROMPT = torch.randint(0, 512, (20,), generator=torch.Generator().manual_seed(8)).tolist()


@pytest.fixture(scope="module", params=["fp32", "quant"])
def model(request) -> Qwen2Model:
    return Qwen2Model.random(TINY, seed=0, fmt=request.param)


def greedy_reference(model: Qwen2Model, prompt: list[int], n: int) -> list[int]:
    """Recompute everything from scratch for each token: no cache reuse at all."""
    seq = list(prompt)
    for _ in range(n):
        logits = model.forward(torch.tensor(seq), torch.arange(len(seq)), KVCache(model.config), last_only=True)
        seq.append(int(logits[-1].argmax()))
    return seq[len(prompt):]


def test_greedy_generation_matches_recomputation_and_reports_usage(model):
    cache = KVCache(model.config)
    gen = generate(model, cache, PROMPT, GREEDY)
    out = list(gen)
    assert out == greedy_reference(model, PROMPT, 12)
    assert gen.stop_reason == "max_tokens"
    u = gen.usage
    assert (u.prompt_tokens, u.reused_tokens, u.prefilled_tokens, u.generated_tokens) == (20, 0, 20, 12)
    assert u.ttft_s > 0 and u.prefill_tps > 0 and u.decode_tps > 0
    assert cache.tokens == PROMPT + out[:-1]  # the last sampled token has no K/V yet


def test_next_turn_reuses_the_history_and_prefills_only_new_tokens(model):
    cache = KVCache(model.config)
    first = list(generate(model, cache, PROMPT, GREEDY))
    turn2 = PROMPT + first + [5, 6, 7]
    gen = generate(model, cache, turn2, GREEDY)
    out = list(gen)
    assert (gen.usage.reused_tokens, gen.usage.prefilled_tokens) == (len(turn2) - 4, 4)  # last sampled token + 3 new
    assert out == list(generate(model, KVCache(model.config), turn2, GREEDY))


def test_fully_cached_prompt_refeeds_its_last_token(model):
    cache = KVCache(model.config)
    first = list(generate(model, cache, PROMPT, GREEDY))
    cache_copy = cache.fork()
    gen = generate(model, cache, PROMPT, GREEDY)  # the cache holds PROMPT and more
    assert list(gen) == first
    assert (gen.usage.reused_tokens, gen.usage.prefilled_tokens) == (19, 1)
    gen = generate(model, cache_copy, PROMPT[:10], GREEDY)  # a rewind to an earlier point
    assert list(gen) == greedy_reference(model, PROMPT[:10], 12)
    assert gen.usage.reused_tokens == 9


def test_diverging_prompt_truncates_to_the_common_prefix(model):
    cache = KVCache(model.config)
    list(generate(model, cache, PROMPT, GREEDY))
    edited = PROMPT[:8] + [1, 2, 3] + PROMPT[11:]
    gen = generate(model, cache, edited, GREEDY)
    assert list(gen) == greedy_reference(model, edited, 12)
    assert gen.usage.reused_tokens == 8


def test_stop_token_ends_the_turn_and_is_yielded(model):
    full = list(generate(model, KVCache(model.config), PROMPT, GREEDY))
    stop = full[4]
    gen = generate(model, KVCache(model.config), PROMPT, GREEDY, stop_ids={stop})
    out = list(gen)
    assert out == full[: full.index(stop) + 1]
    assert gen.stop_reason == "stop"


def test_cancel_mid_decode_leaves_a_cache_that_continues_the_same_text(model):
    uninterrupted = list(generate(model, KVCache(model.config), PROMPT, GREEDY))
    cache, cancel, got = KVCache(model.config), threading.Event(), []
    gen = generate(model, cache, PROMPT, GREEDY, cancel=cancel)
    for token in gen:
        got.append(token)
        if len(got) == 3:
            cancel.set()  # as a UI thread would, between steps
    assert (got, gen.stop_reason) == (uninterrupted[:3], "cancelled")
    assert cache.tokens == PROMPT + got[:2]
    rest = generate(model, cache, PROMPT + got, dataclasses.replace(GREEDY, max_tokens=9))
    assert got + list(rest) == uninterrupted
    assert rest.usage.prefilled_tokens == 1


def test_cancel_during_prefill_keeps_the_finished_chunks(model):
    chunked = Qwen2Model(model.config, model.embed, model.blocks, model.output_norm, model.head)
    chunked.prefill_chunk = 6
    cache, cancel, events = KVCache(model.config), threading.Event(), []

    def on_progress(p: Progress) -> None:
        events.append(p)
        if p.done >= 12:
            cancel.set()

    gen = generate(chunked, cache, PROMPT, GREEDY, cancel=cancel, on_progress=on_progress)
    assert list(gen) == [] and gen.stop_reason == "cancelled"
    assert events == [Progress("prefill", 6, 20), Progress("prefill", 12, 20)]
    assert cache.tokens == PROMPT[:12]
    gen = generate(chunked, cache, PROMPT, GREEDY)
    assert list(gen) == list(generate(model, KVCache(model.config), PROMPT, GREEDY))
    assert gen.usage.reused_tokens == 12


def test_consumer_closing_early_keeps_the_cache_contract(model):
    cache = KVCache(model.config)
    gen = generate(model, cache, PROMPT, GREEDY)
    it = iter(gen)
    got = [next(it), next(it), next(it)]
    it.close()
    assert gen.stop_reason == "cancelled"
    assert cache.tokens == PROMPT + got[:2]


def test_context_full_stops_generation():
    config = dataclasses.replace(TINY, context_length=24)
    model = Qwen2Model.random(config, seed=0)
    gen = generate(model, KVCache(config), PROMPT, GREEDY)  # 20 prompt tokens: room to feed 4 more
    assert len(list(gen)) == 5 and gen.stop_reason == "context_full"
    gen = generate(model, KVCache(config), PROMPT + [1, 2, 3, 4], GREEDY)
    assert list(gen) == [] and gen.stop_reason == "context_full"


def test_seeded_sampling_is_reproducible_across_calls(model):
    s = Sampling(temperature=1.5, top_p=0.95, seed=11, max_tokens=10)
    a = list(generate(model, KVCache(model.config), PROMPT, s))
    b = list(generate(model, KVCache(model.config), PROMPT, s))
    c = list(generate(model, KVCache(model.config), PROMPT, dataclasses.replace(s, seed=12)))
    assert a == b and a != c
