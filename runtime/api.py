"""The Engine seam: what the agent hands an engine and what it streams back.

The agent speaks structured messages (OpenAI chat shape) and JSON-schema tools; it never
sees tokens. Engines (runtime.engine.LocalEngine, agent.engines.openai, agent.engines.scripted)
own templates, tokenization and tool-call parsing.

Message shapes (dicts, OpenAI chat format):
  {"role": "system"|"user", "content": str}
  {"role": "assistant", "content": str, "tool_calls": [{"id": str, "type": "function",
       "function": {"name": str, "arguments": dict}}]}        # tool_calls optional
  {"role": "tool", "tool_call_id": str, "name": str, "content": str}
Tool shapes: {"type": "function", "function": {"name", "description", "parameters"}}.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Protocol, Union

if TYPE_CHECKING:  # the seam itself needs no torch
    import torch

    from runtime.config import ModelConfig
    from runtime.kv_cache import KVCache


TOOL_CHOICES = ("auto", "none", "required")


@dataclass
class Sampling:
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 1.0
    top_k: int = 0  # 0 = off
    seed: int | None = None
    max_tokens: int = 2048

    def __post_init__(self) -> None:
        assert self.temperature >= 0 and 0 < self.top_p <= 1 and self.top_k >= 0 and self.max_tokens > 0


@dataclass
class Request:
    session_id: str
    messages: list[dict]
    tools: list[dict] = field(default_factory=list)
    sampling: Sampling = field(default_factory=Sampling)
    speculation: bool = True  # engines without speculation ignore it
    constrained_tools: bool = True  # engines without constrained decoding ignore it
    # "auto"; "none": the reply must be text, no tool call; "required": the reply must be a tool call.
    # Whichever, `tools` stay in the prompt as they are (the KV prefix holds).
    tool_choice: str = "auto"
    allowed_tools: list[str] | None = None  # names this step may call (None: all of `tools`); [] = tool_choice "none"
    # Per tool name, the schema the call grammar uses instead of the tool's own (the prompt shows the original),
    # e.g. an enum of existing paths or "x-substring-of" (runtime.substring_grammar).
    tool_overrides: dict[str, dict] | None = None
    # The reply's first characters, given: the model continues them (the text streamed back leaves them out).
    # A pipeline step forces its format this way, e.g. "```python\n" for a whole file. Engines that cannot
    # honour it ignore it, so callers accept a reply with or without it.
    reply_prefix: str = ""
    stop: list[str] = field(default_factory=list)  # generation ends once the reply's text contains one of these

    def __post_init__(self) -> None:
        names = {t.get("function", t).get("name") for t in self.tools}
        if self.tool_choice not in TOOL_CHOICES:
            raise ValueError(f"tool_choice must be one of {', '.join(TOOL_CHOICES)}, got {self.tool_choice!r}")
        for what, given in (("allowed_tools", self.allowed_tools), ("tool_overrides", self.tool_overrides)):
            unknown = sorted(set(given or ()) - names)
            if unknown:
                raise ValueError(f"{what} names tools not in the request's tools: {', '.join(unknown)}")
        if self.tool_choice == "required" and not (self.tools and self.allowed_tools != []):
            raise ValueError('tool_choice "required" needs at least one tool it may call')


@dataclass
class Usage:
    prompt_tokens: int = 0  # tokens in the rendered prompt of this call
    reused_tokens: int = 0  # of those, served from the session's KV cache
    prefilled_tokens: int = 0  # of those, computed in this call (prompt_tokens - reused_tokens)
    generated_tokens: int = 0
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    ttft_s: float = 0.0
    prefill_tps: float = 0.0
    decode_tps: float = 0.0

    def add(self, other: "Usage") -> "Usage":
        """Sum of counters (speeds and TTFT are taken from `other`, the latest call)."""
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            reused_tokens=self.reused_tokens + other.reused_tokens,
            prefilled_tokens=self.prefilled_tokens + other.prefilled_tokens,
            generated_tokens=self.generated_tokens + other.generated_tokens,
            drafted_tokens=self.drafted_tokens + other.drafted_tokens,
            accepted_tokens=self.accepted_tokens + other.accepted_tokens,
            ttft_s=other.ttft_s, prefill_tps=other.prefill_tps, decode_tps=other.decode_tps,
        )


@dataclass
class TextDelta:
    text: str


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: dict  # {} when the JSON could not be parsed (then `error` says why)
    error: str | None = None  # set when the call is malformed (bad JSON, not an object)
    raw: str = ""  # the text the model emitted for the call


@dataclass
class Progress:
    """Long prefill or model load progress, for UIs: `done` of `total` units of `what`."""
    what: str
    done: int
    total: int


@dataclass
class Done:
    usage: Usage
    stop_reason: str  # "end_turn" | "tool_use" | "max_tokens" | "runaway" | "cancelled" | "context_full" | "error"
    error: str | None = None


Event = Union[TextDelta, ToolCall, Progress, Done]


class Engine(Protocol):
    name: str  # model or engine name shown to the user

    def stream(self, request: Request, *, cancel: threading.Event | None = None) -> Iterator[Event]:
        """Yield TextDelta/ToolCall/Progress events and exactly one final Done."""
        ...

    def count_tokens(self, text: str) -> int:
        """Tokens in `text` with this engine's tokenizer (an estimate where none is known)."""
        ...

    @property
    def context_window(self) -> int: ...


class Model(Protocol):
    """What LocalEngine needs of a model: the CPU model (runtime.engine.CpuModel) and runtime.cuda.CudaModel."""
    config: ModelConfig
    prefill_chunk: int  # longer prompts are fed in chunks of this many tokens

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor, cache: KVCache, *,
                last_only: bool = False) -> torch.Tensor:
        """tokens, positions (T,) -> logits (T, vocab), or (1, vocab) with last_only; the cache grows by T."""
        ...

    def new_cache(self, *, model_id: str = "") -> KVCache:
        """An empty KV cache where this model keeps its caches (host or device memory)."""
        ...

    def load_cache(self, path: Path, *, model_id: str = "") -> KVCache:
        """A cache saved by KVCache.save; raises on a corrupt, truncated or foreign file."""
        ...
