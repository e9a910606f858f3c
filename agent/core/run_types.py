"""What a run is configured with and what it returns: LoopConfig, Approval (and the Approver callback), RunResult."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from runtime import api
from tools.base import Tool, ToolResult


STOP_REASONS = ("end_turn", "max_turns", "repeated_calls", "timeout", "cancelled", "error", "max_tokens",
                "runaway", "context_full", "prompt_blocked", "hook_stopped")


@dataclass
class LoopConfig:
    max_turns: int = 50  # engine calls per run
    max_wall_s: float | None = None  # wall-clock limit per run; None = none
    max_stop_continuations: int = 3  # Stop decisions that may send the model back, per run
    max_parallel: int = 4  # concurrent read-only tool calls
    sampling: api.Sampling = field(default_factory=api.Sampling)
    speculation: bool = True
    constrained_tools: bool = True
    # After each round of tool results, restate the user's request as a user turn (None: as the profile says).
    # Appended, so the KV prefix holds.
    request_reminder: bool | None = None
    # After the repeated-call warning, another identical read-only call runs again and the next engine call
    # must answer in text (Request.tool_choice "none") instead of the run ending in an error. Other repeated
    # calls still stop the run. The profile may skip the warning (answer_on_first_repeat) and answer a
    # repeated Read with a note first (repeated_read_note), so that an edit can still follow.
    answer_on_repeat: bool = True

    def __post_init__(self) -> None:
        assert self.max_turns >= 1 and self.max_parallel >= 1 and self.max_stop_continuations >= 0
        assert self.max_wall_s is None or self.max_wall_s > 0


@dataclass
class Approval:
    allow: bool
    reason: str = ""  # why not, in words the model can act on


# (tool_name, tool_input, why it needs approval) -> Approval. The TUI asks the user; headless denies.
Approver = Callable[[str, dict, str], Approval]


@dataclass
class RunResult:
    stop_reason: str
    text: str  # the last assistant text of the run
    num_turns: int
    usage: api.Usage  # summed over the run's engine calls
    turn_usage: list[api.Usage]
    duration_s: float
    error: str | None = None

    @property
    def is_error(self) -> bool:
        return self.stop_reason != "end_turn"


# ---- the loop's own state within one run

class RunStop(Exception):
    """Ends the run from inside a batch of tool calls."""

    def __init__(self, reason: str, error: str | None = None) -> None:
        super().__init__(reason)
        self.reason, self.error = reason, error


@dataclass
class PendingCall:
    id: str
    name: str
    args: dict  # what runs (a PreToolUse hook may rewrite it)
    raw_args: dict  # what the model emitted; the history keeps this
    raw_text: str = ""  # the call's text as the model wrote it
    tool: Tool | None = None
    result: ToolResult | None = None  # set when refused or done
    appended: bool = False
    key: tuple | None = None  # (name, arguments) for the repeat check, once admitted
    harness: bool = False  # made by the pipeline, which restores files between tries: no repeat check


@dataclass
class RunState:
    turns: int = 0
    last_text: str = ""
    usages: list[api.Usage] = field(default_factory=list)
    seen: set = field(default_factory=set)
    warned: bool = False
    failed: set = field(default_factory=set)  # repeat-check keys of calls that failed since the last success
    prompt: str = ""  # the user's prompt for this run
    repeated: RunStop | None = None  # set when a read-only call was repeated after the warning
    file_reads: dict = field(default_factory=dict)  # repeat-check key of a Read that showed a file's text -> its data
    noted: set = field(default_factory=set)  # keys of Reads whose repeat got REPEATED_READ_NOTE
    started: float = field(default_factory=time.monotonic)  # when the run began (time.monotonic)
    batch_s: float = 0.0  # the longest batch of sampled candidates so far, checks included
