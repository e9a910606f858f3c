"""The generation loop over (model, cache): prefix reuse, chunked prefill, decode, cancel, usage.

Cache contract at the end of a call (whatever ended it: a stop token, max_tokens, cancel, the
consumer closing the iterator): the cache holds the prompt plus every yielded token except the
last one, whose K/V would only be written by feeding it on a next step. A cancel during prefill
leaves the prompt prefix whose chunks finished. The next call passes the full history (prompt,
generated tokens, new messages); the common prefix is reused and only the rest is prefilled.

Speculation (on unless speculation=False): after each emitted token, up to k tokens drafted by
prompt lookup from the session's tokens are fed with it in one pass; the accepted drafts plus one
token from the pass are emitted, and the cache is cut back to match the contract above. Greedy
output is token-identical to plain decoding; sampled output follows the same distribution.

A `processor` (e.g. runtime.constrain.ToolCallConstraint) sees each step's logits before sampling
(`process`, may mask) and each sampled token before it is yielded (`accept`).
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Iterator, Protocol

import torch

from runtime.api import Progress, Sampling, Usage
from runtime.kv_cache import KVCache
from runtime.model import Qwen2Model
from runtime.sampling import make_generator
from runtime.speculate import DraftLength, Drafter, PromptLookup, accept


class LogitsProcessor(Protocol):
    def process(self, logits: torch.Tensor) -> torch.Tensor:
        """(vocab,) logits of the next token -> the logits to sample from (may be modified in place)."""
        ...

    def accept(self, token: int) -> None:
        """The token sampled from them (also called for the stop token)."""
        ...


class Generation:
    """Iterate for token ids; afterwards `usage` and `stop_reason` ("stop" | "max_tokens" | "cancelled" | "context_full")."""

    def __init__(self, model: Qwen2Model, cache: KVCache, prompt_tokens: list[int], sampling: Sampling, *,
                 stop_ids: tuple[int, ...] | frozenset[int] = (), cancel: threading.Event | None = None,
                 on_progress: Callable[[Progress], None] | None = None, max_tokens: int | None = None,
                 processor: LogitsProcessor | None = None, speculation: bool = True,
                 drafter: Drafter | None = None):
        assert prompt_tokens, "the prompt must hold at least one token"
        self.model, self.cache, self.prompt, self.sampling = model, cache, list(prompt_tokens), sampling
        self.stop_ids, self.cancel, self.on_progress = frozenset(stop_ids), cancel, on_progress
        self.processor = processor
        self.speculation = speculation  # drafts verified in one pass (runtime.speculate)
        self.drafter = drafter  # None: prompt lookup over the session's tokens
        self.max_tokens = sampling.max_tokens if max_tokens is None else max_tokens
        self.usage = Usage(prompt_tokens=len(self.prompt))
        self.stop_reason: str | None = None

    def __iter__(self) -> Iterator[int]:
        model, cache, prompt = self.model, self.cache, self.prompt
        t0 = time.perf_counter()
        if len(prompt) >= model.config.context_length:
            self.stop_reason = "context_full"
            return
        logits, reused = prefill(model, cache, prompt, cancel=self.cancel, on_progress=self.on_progress)
        self.usage.reused_tokens, self.usage.prefilled_tokens = reused, len(prompt) - reused
        if logits is None:
            self.stop_reason = "cancelled"
            return
        t_prefilled = time.perf_counter()
        self.usage.prefill_tps = self.usage.prefilled_tokens / max(t_prefilled - t0, 1e-9)
        generator = make_generator(self.sampling)
        lookup = (self.drafter or PromptLookup(prompt)) if self.speculation else None
        lengths = DraftLength()
        process = self.processor.process if self.processor is not None else None
        rows, draft = logits[-1:], []
        t_first = t0
        try:
            while True:
                emitted: list[int] = []

                def on_token(token: int) -> bool:  # before anything is yielded: the mask's state, stop checks
                    if self.processor is not None:
                        self.processor.accept(token)
                    emitted.append(token)
                    return token not in self.stop_ids and self.usage.generated_tokens + len(emitted) < self.max_tokens

                out = accept(rows, draft, self.sampling, generator, process, on_token)
                if draft:
                    # The pass fed the last token and the draft; keep K/V only for what precedes the last emitted token.
                    cache.truncate(cache.length - len(rows) + len(out.tokens))
                    self.usage.drafted_tokens += len(draft)
                    self.usage.accepted_tokens += out.accepted
                    lengths.update(len(draft), out.accepted)
                if lookup is not None:
                    lookup.extend(out.tokens)
                for j, token in enumerate(out.tokens):
                    if self.usage.generated_tokens == 0:
                        self.usage.ttft_s = time.perf_counter() - t0
                        t_first = time.perf_counter()
                    self.usage.generated_tokens += 1
                    try:
                        yield token
                    except GeneratorExit:  # the consumer stopped mid-pass: drop K/V of tokens it never saw
                        cache.truncate(cache.length - (len(out.tokens) - 1 - j))
                        raise
                if token in self.stop_ids:
                    self.stop_reason = "stop"
                    return
                if self.usage.generated_tokens >= self.max_tokens:
                    self.stop_reason = "max_tokens"
                    return
                if cache.length >= model.config.context_length:  # no position left to feed `token` at
                    self.stop_reason = "context_full"
                    return
                if self._cancelled():
                    return
                # Draft what may follow `token`, within the token budget and the context left after feeding it.
                k = 0
                if lookup is not None:
                    k = min(lengths.next(), self.max_tokens - self.usage.generated_tokens - 1,
                            model.config.context_length - cache.length - 1)
                draft = lookup.draft(k) if k > 0 else []
                feed = [token] + draft
                rows = model.forward(torch.tensor(feed), torch.arange(cache.length, cache.length + len(feed)), cache)
        finally:
            if self.stop_reason is None:  # the consumer stopped iterating
                self.stop_reason = "cancelled"
            if self.usage.generated_tokens > 1:
                self.usage.decode_tps = (self.usage.generated_tokens - 1) / max(time.perf_counter() - t_first, 1e-9)

    def _cancelled(self) -> bool:
        if self.cancel is not None and self.cancel.is_set():
            self.stop_reason = "cancelled"
            return True
        return False


def prefill(model: Qwen2Model, cache: KVCache, prompt: list[int], *, cancel: threading.Event | None = None,
            on_progress: Callable[[Progress], None] | None = None) -> tuple[torch.Tensor | None, int]:
    """Bring `cache` to hold `prompt`: the cached common prefix is reused, the rest fed in chunks (at least the last
    token, so there are logits to sample from). Returns (the last prompt token's logits (1, vocab), tokens reused);
    the logits are None when `cancel` was set between chunks (the cache keeps the chunks that finished)."""
    reused = min(cache.common_prefix_len(prompt), len(prompt) - 1)
    cache.truncate(reused)
    chunk = model.prefill_chunk
    logits = None
    for i in range(reused, len(prompt), chunk):
        if cancel is not None and cancel.is_set():
            return None, reused
        piece = prompt[i : i + chunk]
        logits = model.forward(torch.tensor(piece), torch.arange(i, i + len(piece)), cache, last_only=True)
        if on_progress:
            on_progress(Progress("prefill", i + len(piece) - reused, len(prompt) - reused))
    return logits, reused


def generate(model: Qwen2Model, cache: KVCache, prompt_tokens: list[int], sampling: Sampling, **kwargs) -> Generation:
    """Generate after `prompt_tokens` (the session's whole history); see Generation for the options."""
    return Generation(model, cache, prompt_tokens, sampling, **kwargs)
