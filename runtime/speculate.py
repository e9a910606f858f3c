"""Speculative decoding from the session's own context: prompt-lookup drafts, adaptive draft length,
and the acceptance rule that keeps outputs exactly what plain decoding would give.

An agent re-emits text it has already seen: an Edit's old_string and most of its new_string are
copied from a Read result earlier in the conversation. `PromptLookup` indexes the session's tokens
(prompt and generated so far) by bigram and proposes the tokens that followed the best earlier
match of the current suffix: the candidate with the longest backward match, the most recent on
ties, and the source it was drafting from as long as that keeps matching (so it stays on the file
being copied). After a mismatch the next lookup starts from the new suffix (re-anchoring).

`DraftLength` adapts the draft length to measured acceptance: it grows while drafts are accepted
whole, shrinks to what was accepted after a miss, and pauses drafting after repeated total misses
(plain prose, where a verify pass would cost more than it gains).

`accept` applies the standard rule to one verify pass. With a draft that is a point mass (prompt
lookup proposes one token, q(d) = 1), a drafted token d is accepted with probability p(d), and on
rejection the correction is drawn from p with d removed, renormalized: the emitted tokens follow p
exactly. With greedy sampling this is "accept while the draft equals the argmax", so speculative
output is token-identical to plain decoding.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Callable, Protocol

import torch

from runtime.api import Sampling
from runtime.sampling import draw, processed_probs

MAX_BACK = 16  # how far back a candidate's match with the current suffix is compared
MAX_CANDIDATES = 24  # most recent occurrences of the bigram looked at per lookup
_NUMBERED = re.compile(r"^ *\d+\t", re.M)  # Read's `cat -n` prefixes


def corpus_texts(text: str) -> list[str]:
    """The forms in which a model may copy a tool result's text: without Read's line numbers, and that
    text JSON-escaped as it appears inside a tool call's string argument."""
    lines = text.split("\n")
    if sum(1 for ln in lines if _NUMBERED.match(ln)) >= max(1, len(lines) // 2):
        text = _NUMBERED.sub("", text)
    return [text, json.dumps(text, ensure_ascii=False)[1:-1]]


class Drafter(Protocol):
    """Proposes tokens that may come next; told every token that really came."""

    def draft(self, k: int) -> list[int]:
        """Up to k tokens to try after the tokens seen so far."""
        ...

    def extend(self, tokens: list[int]) -> None:
        """Tokens emitted since the last call (accepted drafts and the pass's own token)."""
        ...


class PromptLookup:
    """Drafts the continuation of the token history from an earlier occurrence of its suffix.

    `corpus`: extra token sequences to draft from that are not in the history as such, e.g. the
    JSON-escaped text of files the conversation read (a Write or Edit call carries a file's text
    JSON-escaped, so its newlines and quotes differ from the Read result's tokens).
    """

    def __init__(self, tokens: list[int], corpus: list[list[int]] | tuple = ()):
        self.sources: list[list[int]] = [[]]  # 0: the history (grows); 1..: the corpus
        self.tokens = self.sources[0]
        self.index: dict[tuple[int, int], list[tuple[int, int]]] = {}  # (a, b) -> (source, i) after a, b
        self.anchor: tuple[int, int] | None = None  # the source and position the last draft continues from
        for seq in corpus:
            if len(seq) >= 3:
                src = len(self.sources)
                self.sources.append(list(seq))
                for i in range(2, len(seq)):
                    self.index.setdefault((seq[i - 2], seq[i - 1]), []).append((src, i))
        self.extend(tokens)

    def extend(self, tokens: list[int]) -> None:
        toks, index = self.tokens, self.index
        for t in tokens:
            if self.anchor is not None:  # the followed source is kept only while it predicts what comes
                src, i = self.anchor
                seq = self.sources[src]
                self.anchor = (src, i + 1) if i < len(seq) and seq[i] == t and i + 1 < len(seq) + (src == 0) else None
            if len(toks) >= 2:
                index.setdefault((toks[-2], toks[-1]), []).append((0, len(toks)))
            toks.append(t)

    def draft(self, k: int) -> list[int]:
        """Up to k tokens that followed the best earlier match of the history's suffix ([] when none)."""
        toks = self.tokens
        n = len(toks)
        if k <= 0 or n < 3:
            return []
        if self.anchor is not None and self.anchor[1] < len(self.sources[self.anchor[0]]):
            src, start = self.anchor
        else:
            candidates = self.index.get((toks[-2], toks[-1]))
            if not candidates:
                return []
            best, best_len = None, -1
            for src, i in reversed(candidates[-MAX_CANDIDATES:]):
                seq = self.sources[src]
                if i >= len(seq):
                    continue
                m = 2  # the bigram itself
                while m < MAX_BACK and i - m - 1 >= 0 and seq[i - m - 1] == toks[n - m - 1]:
                    m += 1
                if m > best_len:  # strictly longer wins; on ties the most recent (seen first) stays
                    best, best_len = (src, i), m
            if best is None:
                return []
            src, start = best
        self.anchor = (src, start)
        return self.sources[src][start : start + k]


@dataclass
class DraftLength:
    """How many tokens to draft next, from how the last drafts fared."""
    k: int = 4
    k_min: int = 1
    k_max: int = 12
    pause_after: int = 3  # total misses in a row before drafting pauses
    pause_steps: int = 16  # plain decode steps per pause
    misses: int = 0
    paused: int = 0

    def next(self) -> int:
        """The draft length for this step; 0 while paused."""
        if self.paused > 0:
            self.paused -= 1
            return 0
        return self.k

    def update(self, drafted: int, accepted: int) -> None:
        if drafted <= 0:
            return
        if accepted == drafted:
            self.k = min(self.k_max, self.k * 2)
            self.misses = 0
        else:
            self.k = max(self.k_min, accepted + 1)
            self.misses = self.misses + 1 if accepted == 0 else 0
            if self.misses >= self.pause_after:
                self.paused, self.misses = self.pause_steps, 0


@dataclass
class Acceptance:
    tokens: list[int] = field(default_factory=list)  # accepted drafts, then the correction or bonus token
    accepted: int = 0  # how many of `tokens` are accepted drafts


def accept(rows: torch.Tensor, draft: list[int], sampling: Sampling, generator: torch.Generator | None,
           process: Callable[[torch.Tensor], torch.Tensor] | None = None,
           on_token: Callable[[int], bool] | None = None) -> Acceptance:
    """Tokens to emit from one verify pass.

    rows (len(draft)+1, vocab): row j holds the logits after the history plus draft[:j]. `process`
    (a logits processor, e.g. the tool-call mask) is applied to each row just before it is used, and
    `on_token(t)` is called for each emitted token in order; it returns False to stop early (a stop
    token, a budget), in which case `t` is the last token emitted.
    """
    assert rows.shape[0] == len(draft) + 1, (rows.shape, len(draft))
    out = Acceptance()
    for j in range(len(draft) + 1):
        logits = rows[j] if process is None else process(rows[j])
        d = draft[j] if j < len(draft) else None
        if sampling.temperature == 0:
            token = int(logits.argmax())
        else:
            probs = processed_probs(logits, sampling)
            if d is not None and float(torch.rand((), generator=generator)) < float(probs[d]):
                token = d
            else:
                if d is not None:  # the residual max(0, p - q) with q a point mass at d
                    probs = probs.clone()
                    probs[d] = 0.0
                    if float(probs.sum()) <= 0:  # p was a point mass at d, so d cannot be rejected
                        probs[d] = 1.0
                token = draw(probs, generator)
        out.tokens.append(token)
        if d is not None and token == d:
            out.accepted += 1
        if on_token is not None and not on_token(token):
            break
        if token != d:
            break
    return out
