"""An engine that replays predetermined assistant turns: deterministic runs for tests, demos, bug reports.

A turn is {"text": str, "tool_calls": [{"name": str, "arguments": dict | str}]} or a raw string
parsed as model output (`<tool_call>{json}</tool_call>` like Qwen). Usage is plausible and
honest about the prefix: the prompt is rendered ChatML-like and split on whitespace, and
reused_tokens is the common prefix with what the previous call of the same session left in
its (pretend) cache: that call's prompt plus its reply. A harness that breaks the KV
invariant sees reused_tokens drop, just as with the real runtime.
"""
from __future__ import annotations

import copy
import json
import threading
import time
from pathlib import Path
from typing import Iterator

from runtime.api import Done, Request, TextDelta, ToolCall, Usage
from runtime.candidates import Candidate
from runtime.toolcalls import ToolCallParser


class ScriptError(Exception):
    """The script file cannot be used; the message is one line."""


class ScriptedEngine:
    def __init__(self, turns: list, name: str = "scripted", context_window: int = 32768,
                 delay_s: float = 0.0) -> None:
        for i, t in enumerate(turns):
            if not isinstance(t, (str, dict)):
                raise ScriptError(f"script turn {i + 1}: expected an object or a string, got {type(t).__name__}")
        self.turns = list(turns)
        self.name = name
        self._context_window = context_window
        self.delay_s = delay_s  # pause between chunks, so cancellation can be exercised
        self.requests: list[Request] = []  # deep copies of every request, for KV-invariant checks
        self._next = 0
        self._cache: dict[str, list[str]] = {}  # session_id -> tokens "in the KV cache"
        self._lock = threading.Lock()

    @classmethod
    def from_file(cls, path: str | Path, **kw) -> "ScriptedEngine":
        try:
            turns = json.loads(Path(path).read_text())
        except OSError as e:
            raise ScriptError(f"cannot read script {path}: {e.strerror}") from None
        except json.JSONDecodeError as e:
            raise ScriptError(f"script {path} is not valid JSON: {e.msg} at line {e.lineno}") from None
        if not isinstance(turns, list):
            raise ScriptError(f"script {path} must be a JSON list of assistant turns")
        return cls(turns, **kw)

    @property
    def context_window(self) -> int:
        return self._context_window

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def stream(self, request: Request, *, cancel: threading.Event | None = None) -> Iterator:
        t0 = time.monotonic()
        with self._lock:
            self.requests.append(copy.deepcopy(request))
            turn = self.turns[self._next] if self._next < len(self.turns) else None
            self._next += 1
        prompt = render_prompt(request.messages, request.tools).split()
        cached = self._cache.get(request.session_id, [])
        reused = _common_prefix(prompt, cached)
        usage = Usage(prompt_tokens=len(prompt), reused_tokens=reused, prefilled_tokens=len(prompt) - reused)
        if turn is None:
            self._cache[request.session_id] = prompt
            yield Done(usage, "error", f"scripted engine: script exhausted after {len(self.turns)} turns")
            return
        text, calls = _split_turn(turn, request)
        generated: list[str] = []
        for chunk in _chunks(text):
            if cancel is not None and cancel.is_set():
                break
            generated.append(chunk)
            yield TextDelta(chunk)
            if self.delay_s:
                (cancel or threading.Event()).wait(self.delay_s)
        cancelled = cancel is not None and cancel.is_set()
        if not cancelled:
            for c in calls:
                yield c
        reply = {"role": "assistant", "content": "".join(generated),
                 "tool_calls": [] if cancelled else [_as_message_call(c) for c in calls]}
        out_tokens = _render_reply(reply).split()
        # The cache holds what was computed: the prompt and the generated reply.
        self._cache[request.session_id] = prompt + out_tokens
        usage.generated_tokens = len(out_tokens)
        usage.ttft_s = time.monotonic() - t0
        stop = "cancelled" if cancelled else ("tool_use" if calls else "end_turn")
        if isinstance(turn, dict) and turn.get("stop_reason") and not cancelled:
            stop = turn["stop_reason"]  # lets a script play "max_tokens" or "context_full"
        yield Done(usage, stop)


    def sample(self, request: Request, n: int, *, cancel: threading.Event | None = None,
               greedy: int = 0) -> tuple[list, Usage]:
        """Candidate replies (verified tries): the next turn's "candidates" list of texts, n at most; an item may be
        {"text": ..., "finish_reason": "max_tokens"} to play a reply cut off at the limit."""
        with self._lock:
            self.requests.append(copy.deepcopy(request))
            turn = self.turns[self._next] if self._next < len(self.turns) else {}
            self._next += 1
        texts = turn.get("candidates", []) if isinstance(turn, dict) else []
        items = [t if isinstance(t, dict) else {"text": t} for t in texts[:n]]
        out = [Candidate(t["text"], len(t["text"].split()), -float(i), t.get("finish_reason", "stop"))
               for i, t in enumerate(items)]
        prompt = render_prompt(request.messages, request.tools).split()
        return out, Usage(prompt_tokens=len(prompt), generated_tokens=sum(c.tokens for c in out))


def _split_turn(turn: str | dict, request: Request) -> tuple[str, list[ToolCall]]:
    """Visible text and tool calls of one scripted turn."""
    if isinstance(turn, str):
        names = frozenset(t["function"]["name"] for t in request.tools)
        parser = ToolCallParser(tool_names=names)
        parser.feed(turn)
        parser.finish()
        calls = [ToolCall(f"call_{i}", c.name, c.arguments, c.error, c.raw) for i, c in enumerate(parser.calls)]
        return "".join(parser.text), calls
    calls = []
    for i, c in enumerate(turn.get("tool_calls") or []):
        args = c.get("arguments", {})
        raw = args if isinstance(args, str) else json.dumps({"name": c.get("name"), "arguments": args})
        error = None
        if isinstance(args, str):  # a script may play a model that emitted broken JSON
            try:
                args = json.loads(args)
            except json.JSONDecodeError as e:
                args, error = {}, f"tool call arguments are not valid JSON ({e.msg})"
        if not isinstance(args, dict) and error is None:
            args, error = {}, "tool call arguments must be a JSON object"
        calls.append(ToolCall(f"call_{i}", str(c.get("name", "")), args, error, raw))
    return str(turn.get("text", "")), calls


def _chunks(text: str, n: int = 3) -> list[str]:
    """A few pieces, like a stream of deltas."""
    if not text:
        return []
    size = max(1, -(-len(text) // n))
    return [text[i:i + size] for i in range(0, len(text), size)]


def _as_message_call(c: ToolCall) -> dict:
    return {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}


def render_prompt(messages: list[dict], tools: list[dict]) -> str:
    """ChatML-like text of a request, ending with the assistant generation prompt."""
    parts = []
    for i, m in enumerate(messages):
        if m["role"] == "system" or (i == 0 and tools):
            sys_text = m["content"] if m["role"] == "system" else ""
            parts.append(f"<|im_start|>system\n{sys_text}\n# Tools\n{json.dumps(tools, sort_keys=True)}<|im_end|>\n")
            if m["role"] == "system":
                continue
        if m["role"] == "assistant":
            parts.append("<|im_start|>assistant\n" + _render_reply(m) + "\n")
        elif m["role"] == "tool":
            parts.append(f"<|im_start|>user\n<tool_response>\n{m['content']}\n</tool_response><|im_end|>\n")
        else:
            parts.append(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n")
    parts.append("<|im_start|>assistant\n")
    return "".join(parts)


def _render_reply(m: dict) -> str:
    """An assistant message body as the model would have produced it (ids are not rendered, as in Qwen)."""
    calls = "".join(
        "\n<tool_call>\n" + json.dumps({"name": c["function"]["name"], "arguments": c["function"]["arguments"]})
        + "\n</tool_call>" for c in m.get("tool_calls") or [])
    return (m.get("content") or "") + calls + "<|im_end|>"


def _common_prefix(a: list[str], b: list[str]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i
