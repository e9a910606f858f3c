"""Context budget: token accounting for the conversation, thresholds, and clearing of stale tool results.

Counting uses the engine's own tokenizer (`engine.count_tokens`: the real one for the local engine,
an estimate for the scripted and OpenAI engines). The last engine call is the anchor: its prompt
plus its reply is the exact size of the history up to that reply; only messages appended since are
counted. Without an anchor (a resumed session, after clearing or compaction) every message is counted.

Clearing replaces the content of old tool results with a one-line placeholder; the call itself stays.
It changes the prompt from the first cleared result on, so that suffix is prefilled again: it is done
rarely and in large chunks (all but the most recent results at once, and only when it frees a good
share of the window), and the prefill it costs is reported.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable

PLACEHOLDER = "[Old {name} result cleared to save context; the call is above. Run it again if you need it.]"
MESSAGE_OVERHEAD = 4  # role and turn markers per message (Qwen: <|im_start|>role\n ... <|im_end|>\n)


@dataclass
class BudgetConfig:
    """Thresholds are fractions of the engine's context window."""
    clear_at: float = 0.6  # clear stale tool results past this
    compact_at: float = 0.8  # auto-compact past this (settings `autoCompactThreshold`, --auto-compact-threshold)
    auto_compact: bool = True  # settings `autoCompact`
    keep_results: int = 3  # the most recent tool results are never cleared
    min_clear_fraction: float = 0.1  # clear only when it frees at least this share of the window
    reattach_fraction: float = 0.15  # budget for files re-attached after compaction
    reattach_files: int = 5
    instructions_fraction: float = 0.25  # budget for the user's instructions kept verbatim
    summary_tokens: int = 1024  # max tokens of the model's summary

    def __post_init__(self) -> None:
        for name in ("clear_at", "compact_at", "min_clear_fraction", "reattach_fraction", "instructions_fraction"):
            value = getattr(self, name)
            assert 0 < value <= 1, f"{name} must be in (0, 1], not {value}"
        assert self.keep_results >= 0 and self.reattach_files >= 0 and self.summary_tokens > 0


SETTINGS_KEYS = {"autoCompactThreshold": "compact_at", "clearToolResultsThreshold": "clear_at"}


def parse_threshold(value: object) -> float | None:
    """0.8, 80 or "80%" -> 0.8; None when it is not a threshold."""
    if isinstance(value, str):
        text = value.strip().rstrip("%")
        try:
            value = float(text) / (100 if value.strip().endswith("%") else 1)
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value) / 100 if value > 1 else float(value)
    return value if 0 < value <= 1 else None


def budget_from_settings(values: dict[str, tuple[object, str]],
                         compact_at: float | None = None) -> tuple[BudgetConfig, list[str]]:
    """autoCompactThreshold, clearToolResultsThreshold and autoCompact from the settings' top-level values
    ({key: (value, file)}, hooks.settings.Settings.other); `compact_at` (the CLI flag) wins."""
    warnings: list[str] = []
    kwargs: dict = {}
    for key, attr in SETTINGS_KEYS.items():
        if key in values:
            value, path = values[key]
            if parse_threshold(value) is None:
                warnings.append(f"settings: {path}: {key} must be a fraction (0.8) or a percentage (80); ignored")
            else:
                kwargs[attr] = parse_threshold(value)
    if compact_at is not None:
        kwargs["compact_at"] = compact_at
    if "compact_at" in kwargs and "clear_at" not in kwargs:
        kwargs["clear_at"] = min(BudgetConfig.clear_at, kwargs["compact_at"])
    auto, path = values.get("autoCompact", (True, ""))
    if not isinstance(auto, bool):
        warnings.append(f"settings: {path}: autoCompact must be true or false; ignored")
        auto = True
    kwargs["auto_compact"] = auto
    return BudgetConfig(**kwargs), warnings


class TokenMeter:
    """Tokens of messages and tool schemas with the engine's tokenizer; per-message counts are cached."""

    def __init__(self, count: Callable[[str], int]) -> None:
        self.count = count
        self._cache: dict[int, tuple[dict, int]] = {}  # id(message) -> (message, tokens); the ref keeps the id valid
        self._tools: tuple[str, int] = ("", 0)
        self._anchor: tuple[list, int, object, int] | None = None  # (list, length, last message, exact tokens)

    def message(self, m: dict) -> int:
        hit = self._cache.get(id(m))
        if hit is not None and hit[0] is m:
            return hit[1]
        n = MESSAGE_OVERHEAD + self.count(m.get("content") or "")
        for c in m.get("tool_calls") or []:
            fn = c.get("function") or {}
            n += self.count(json.dumps({"name": fn.get("name"), "arguments": fn.get("arguments")},
                                       ensure_ascii=False))
        if len(self._cache) > 20_000:
            self._cache.clear()
        self._cache[id(m)] = (m, n)
        return n

    def messages(self, messages: list[dict]) -> int:
        return sum(self.message(m) for m in messages)

    def tools(self, schemas: list[dict]) -> int:
        text = json.dumps(schemas, ensure_ascii=False, sort_keys=True)
        if self._tools[0] != text:
            self._tools = (text, self.count(text))
        return self._tools[1]

    def anchor(self, messages: list[dict], exact_tokens: int) -> None:
        """The engine's exact count for `messages` as they are now (its last prompt plus reply)."""
        self._anchor = (messages, len(messages), messages[-1] if messages else None, exact_tokens)

    def invalidate(self) -> None:
        self._anchor = None

    def total(self, messages: list[dict], schemas: list[dict]) -> int:
        """Tokens the next prompt will hold: the anchor plus what came since, else a full count."""
        a = self._anchor
        if a is not None and a[0] is messages and len(messages) >= a[1] and (a[1] == 0 or messages[a[1] - 1] is a[2]):
            return a[3] + self.messages(messages[a[1]:])
        return self.tools(schemas) + self.messages(messages)


@dataclass
class ClearPlan:
    edits: list[tuple[int, str]] = field(default_factory=list)  # (message index, placeholder)
    freed: int = 0  # tokens saved
    first: int | None = None  # first changed message: the prompt is prefilled again from here

    @property
    def count(self) -> int:
        return len(self.edits)


def plan_clearing(messages: list[dict], meter: TokenMeter, keep: int) -> ClearPlan:
    """Every tool result but the `keep` most recent, where the placeholder is shorter than the result."""
    results = [i for i, m in enumerate(messages) if m.get("role") == "tool"]
    plan = ClearPlan()
    for i in results[:max(0, len(results) - keep)]:
        m = messages[i]
        text = PLACEHOLDER.format(name=m.get("name") or "tool")
        if m.get("content") == text:
            continue  # cleared before
        saved = meter.message(m) - meter.message({**m, "content": text})
        if saved > 0:
            plan.edits.append((i, text))
            plan.freed += saved
    plan.first = plan.edits[0][0] if plan.edits else None
    return plan


def is_placeholder(text: str) -> bool:
    head, _, tail = PLACEHOLDER.partition("{name}")
    return text.startswith(head) and text.endswith(tail)
