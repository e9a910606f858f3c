"""Typed messages the agent bridge (worker thread) and the widgets post to the app."""
from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from textual.message import Message

from agent.core.approval import PermissionRequest
from runtime.api import Usage
from tools.base import ToolResult


class ControllerReady(Message):
    """The session core is built (the model is loaded)."""

    def __init__(self, controller: Any) -> None:
        super().__init__()
        self.controller = controller


class ControllerFailed(Message):
    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error  # one line


class TextChunk(Message):
    """Coalesced assistant text deltas."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class AssistantDone(Message):
    """One engine call ended; `message` is what the history holds (tool calls included)."""

    def __init__(self, message: dict, usage: Usage) -> None:
        super().__init__()
        self.message = message
        self.usage = usage


class UsageUpdated(Message):
    """An engine call's usage was counted; the status bar reads the figures from the controller."""


class ToolStarted(Message):
    def __init__(self, tool_use_id: str, tool_name: str, tool_input: dict) -> None:
        super().__init__()
        self.tool_use_id, self.tool_name, self.tool_input = tool_use_id, tool_name, tool_input


class ToolFinished(Message):
    def __init__(self, tool_use_id: str, tool_name: str, tool_input: dict, result: ToolResult) -> None:
        super().__init__()
        self.tool_use_id, self.tool_name, self.tool_input, self.result = tool_use_id, tool_name, tool_input, result


class EngineProgressed(Message):
    def __init__(self, what: str, done: int, total: int) -> None:
        super().__init__()
        self.what, self.done, self.total = what, done, total


class PermissionAsked(Message):
    """The worker waits on `future` for a PermissionAnswer."""

    def __init__(self, request: PermissionRequest, future: Future) -> None:
        super().__init__()
        self.request, self.future = request, future


class RunFinished(Message):
    """A queued item (prompt or command) is done; `result` is the RunResult when a prompt ran."""

    def __init__(self, result: Any = None, slash: Any = None, error: str | None = None) -> None:
        super().__init__()
        self.result, self.slash, self.error = result, slash, error


class Notice(Message):
    """A line for the user (hook output, warnings)."""

    def __init__(self, text: str, severity: str = "information") -> None:
        super().__init__()
        self.text, self.severity = text, severity


class PromptSubmitted(Message):
    """The user pressed Enter in the prompt input."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
