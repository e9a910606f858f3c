"""A text reply that has become one piece of text repeated (constrain.RepetitionGuard over its tokens): greedy
decoding of a small model can repeat a line until the token limit (a `.gitignore` listing `*.pyd` again and again),
which costs the whole budget before anyone can refuse the reply. A run the prompt itself holds is a copy, not a loop
(rewriting a file with a long table of zeros)."""
from __future__ import annotations

from runtime.constrain import RUNAWAY_REPEATS, RepetitionGuard
from runtime.tokenizer import Tokenizer


class TextLoop:
    """feed(token) -> a one-line reason once the reply's latest tokens are a loop, else None."""

    def __init__(self, tokenizer: Tokenizer, prompt: list[int]) -> None:
        self._tok, self._prompt = tokenizer, prompt
        self._prompt_text: str | None = None  # decoded on the first suspicion only
        self._guard = RepetitionGuard()
        self.reason: str | None = None

    def feed(self, token: int) -> str | None:
        if self.reason is not None:
            return self.reason
        period = self._guard.feed(token)
        if period is None:
            return None
        unit = self._tok.decode(self._guard.tokens[-period:])
        if self._prompt_text is None:
            self._prompt_text = self._tok.decode(self._prompt)
        if unit.strip() and unit * RUNAWAY_REPEATS in self._prompt_text:  # copied: watch afresh from here
            self._guard = RepetitionGuard()
            return None
        shown = repr(unit if len(unit) <= 40 else unit[:40] + "...")
        self.reason = f"the reply repeated the same text ({shown}) {self._guard.window // period} times in a row"
        return self.reason
