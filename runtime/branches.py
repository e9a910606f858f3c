"""N sampled continuations of one prompt, decoded together (verified tries: sample N candidates, keep those that pass).

The prompt is prefilled once into the caller's cache (its cached prefix reused, as `generate` does) and stays there as
the branches' shared prefix: each branch keeps only its own positions (runtime.kv_cache.BranchKV), and every step feeds
the unfinished branches' last tokens through one batched forward (Qwen2Model.forward_branches: each weight is read
once per step for all rows, each prefix key once for all branches' queries). Branches with the same tokens so far
are one row (all of them start as one; a row is copied when its branches sample different tokens), so N copies of one
reply cost one branch's decode. A branch drops out of the batch when it samples a stop token or reaches its limit.

Branch i draws from the distribution `generate` samples from, with its own generator seeded seeds[i], so its tokens
are those of generate(model, cache, prompt, replace(sampling, seed=seeds[i]), speculation=False, ...) (greedy: every
branch is the one greedy continuation), up to the fp32 rounding by which batched attention differs from a single
decode (a near-tie can flip).

Cache contract: the caller's cache ends holding exactly the prompt. To go on with a winner, `keep(cache, branch)`
appends its tokens but the last with their K/V, what `generate` would have left (a copy of the branch's own positions;
re-feeding its tokens instead would cost a prefill of them: bench/branches.py measures both).
"""
from __future__ import annotations

import dataclasses
import secrets
import threading
from dataclasses import dataclass, field
from typing import Callable, Union

import torch

from runtime.api import Progress, Sampling
from runtime.generate import LogitsProcessor, prefill
from runtime.kv_cache import BranchKV, KVCache
from runtime.model import Qwen2Model
from runtime.sampling import sample
from runtime.text_loop import TextLoop

# Either the mask interface of constrained decoding (process, then accept with the sampled token), or a function of
# (the branch's tokens so far, logits (vocab,)) -> the logits to sample from.
BranchProcessor = Union[LogitsProcessor, Callable[[list[int], torch.Tensor], torch.Tensor]]


@dataclass
class Branch:
    seed: int
    start: int  # prompt tokens before the branch's own
    tokens: list[int] = field(default_factory=list)  # sampled tokens, the stop token included
    logprob: float = 0.0  # sum of log p(token) under the model's logits after the branch's processor (temperature 1)
    finish_reason: str | None = None  # "stop" | "max_tokens" | "context_full" | "cancelled" | "runaway"
    k: torch.Tensor | None = None  # K/V of tokens[:-1] (layers, kv_heads, len(tokens) - 1, head_dim), for keep()
    v: torch.Tensor | None = None

    @property
    def mean_logprob(self) -> float:
        return self.logprob / len(self.tokens) if self.tokens else 0.0


def keep(cache: KVCache, branch: Branch) -> None:
    """Make `cache`, which holds the branches' prompt, hold what decoding `branch` alone would have left: the prompt
    plus the branch's tokens but the last (no step fed it). Copies only the branch's own positions."""
    assert cache.length == branch.start and branch.k is not None, (cache.length, branch.start)
    cache.append_kv(branch.tokens[:-1], branch.k, branch.v)


def generate_branches(model: Qwen2Model, cache: KVCache, prompt_tokens: list[int], n: int, sampling: Sampling,
                      max_new_tokens: int | None = None, stop_ids: tuple[int, ...] | frozenset[int] = (), *,
                      seeds: list[int] | None = None, logits_processors: list[BranchProcessor | None] | None = None,
                      cancel: threading.Event | None = None,
                      on_progress: Callable[[Progress], None] | None = None, greedy: int = 0,
                      loops: list[TextLoop] | None = None) -> list[Branch]:
    """n branches after `prompt_tokens` (the session's whole history), at most max_new_tokens each (default
    sampling.max_tokens). seeds: one per branch (default sampling.seed + i, or fresh entropy when it is None);
    logits_processors: one per branch (each keeps its own state), None for none; the first `greedy` branches take the
    most likely token at every step (the greedy reply beside sampled ones); loops: one per branch, ending a branch
    whose text became one piece repeated ("runaway")."""
    prompt = list(prompt_tokens)
    assert n >= 1 and prompt, (n, len(prompt))
    limit = sampling.max_tokens if max_new_tokens is None else max_new_tokens
    assert limit >= 1, limit
    if seeds is None:
        seeds = [secrets.randbits(63) for _ in range(n)] if sampling.seed is None else [sampling.seed + i for i in range(n)]
    processors = [None] * n if logits_processors is None else list(logits_processors)
    assert len(seeds) == n and len(processors) == n, (n, len(seeds), len(processors))
    stops, context = frozenset(stop_ids), model.config.context_length
    if len(prompt) >= context:
        return [Branch(seed, cache.length, finish_reason="context_full") for seed in seeds]
    logits, _ = prefill(model, cache, prompt, cancel=cancel, on_progress=on_progress)
    branches = [Branch(seed, cache.length) for seed in seeds]
    if logits is None:
        for br in branches:
            br.finish_reason = "cancelled"
        return branches
    kv = BranchKV(cache, 1, capacity=min(limit, 256))
    generators = [torch.Generator().manual_seed(seed) for seed in seeds]
    argmax = dataclasses.replace(sampling, temperature=0.0)
    samplings = [argmax if i < greedy else sampling for i in range(n)]
    # Branches whose tokens are the same so far share one of kv's rows and one row of the forward (their logits are
    # the same): a peaked distribution often gives four copies of one text, decoded at the cost of one.
    groups = [list(range(n))]  # the branches in each of kv's rows
    rows = logits.view(1, -1)
    while True:
        split: list[tuple[int, list[int]]] = []  # (kv row, branches that go on with one token) per next row
        for r, (members, logits_row) in enumerate(zip(groups, rows)):
            going: dict[int, list[int]] = {}
            shared = None  # the group's log-probabilities, computed once for its members without a processor
            for i in members:
                br, proc, row = branches[i], processors[i], logits_row
                if proc is not None:  # a processor may edit the row it is given: each branch gets its own copy
                    row = row.clone()
                    row = proc.process(row) if hasattr(proc, "process") else proc(br.tokens, row)
                token = sample(row, samplings[i], generators[i])
                if proc is None:
                    shared = torch.log_softmax(row.float(), -1) if shared is None else shared
                    br.logprob += float(shared[token])
                else:
                    br.logprob += float(torch.log_softmax(row.float(), -1)[token])
                if hasattr(proc, "accept"):
                    proc.accept(token)
                br.tokens.append(token)
                if token in stops:
                    br.finish_reason = "stop"
                elif getattr(proc, "runaway", None) or (loops is not None and loops[i].feed(token)):  # a loop
                    br.finish_reason = "runaway"
                elif len(br.tokens) >= limit:
                    br.finish_reason = "max_tokens"
                elif br.start + len(br.tokens) - 1 >= context:  # no position left to feed the token at
                    br.finish_reason = "context_full"
                if br.finish_reason is not None:
                    fed, br.k, br.v = kv.branch(r)
                    assert fed == br.tokens[:-1]
                else:
                    going.setdefault(token, []).append(i)
            split += [(r, same) for same in going.values()]
        if cancel is not None and cancel.is_set():
            for r, same in split:
                for i in same:
                    branches[i].finish_reason = "cancelled"
                    _, branches[i].k, branches[i].v = kv.branch(r)
            split = []
        if not split:
            return branches
        if [r for r, _ in split] != list(range(len(groups))):
            kv.select([r for r, _ in split])  # finished branches drop out; a row whose branches parted is copied
        groups = [same for _, same in split]
        feed = torch.tensor([branches[same[0]].tokens[-1] for same in groups])
        rows = model.forward_branches(feed, kv)  # (len(groups), vocab)
