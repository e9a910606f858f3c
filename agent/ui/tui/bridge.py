"""The bridge from the agent core (worker thread) to the app: loop events become coalesced messages.

The EventBus calls the bridge on the worker thread; it posts typed messages (thread-safe in
Textual). Text deltas are buffered and posted at most every FLUSH_S; any other event flushes
first, so order is kept. The app also calls flush() every FLUSH_S, so text buffered before the
model stalls (a tool call being generated, a slow token) still shows; a flush posts while
holding the lock, so a flush from the UI thread cannot overtake the worker's next event. Permission requests block the worker until the user answers in the
app, or until the run is cancelled (then the call is denied).
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Callable

from textual.message import Message

from agent.core import events as ev
from agent.core.approval import PermissionAnswer, PermissionRequest
from agent.ui.tui import messages as m
from runtime.api import Progress

FLUSH_S = 0.05  # at most 20 text updates a second, however fast tokens arrive


class Bridge:
    def __init__(self, post: Callable[[Message], object]) -> None:
        self.post = post
        self.cancel: threading.Event | None = None  # the running item's cancel event
        self._buffer: list[str] = []
        self._last_flush = 0.0
        self._lock = threading.Lock()

    def __call__(self, e: ev.Event) -> None:
        """EventBus subscriber."""
        if isinstance(e, ev.TextDelta):
            with self._lock:
                self._buffer.append(e.text)
                due = time.monotonic() - self._last_flush >= FLUSH_S
            if due:
                self.flush()
            return
        self.flush()
        if isinstance(e, ev.AssistantTurn):
            self.post(m.AssistantDone(e.message, e.usage))
        elif isinstance(e, ev.PreToolUse):
            self.post(m.ToolStarted(e.tool_use_id, e.tool_name, e.tool_input))
        elif isinstance(e, ev.ToolResultEvent):
            self.post(m.ToolFinished(e.tool_use_id, e.tool_name, e.tool_input, e.result))
        elif isinstance(e, ev.TurnUsage):
            self.post(m.UsageUpdated())
        elif isinstance(e, ev.EngineProgress):
            self.post(m.EngineProgressed(e.what, e.done, e.total))
        elif isinstance(e, ev.PipelineStep):
            self.post(m.Notice(f"{e.step}: {e.detail}"))

    def flush(self) -> None:
        """Post buffered text now (any thread)."""
        with self._lock:
            text = "".join(self._buffer)
            self._buffer.clear()
            self._last_flush = time.monotonic()
            if text:
                self.post(m.TextChunk(text))

    def ask(self, request: PermissionRequest) -> PermissionAnswer:
        """SessionCore.ask: show the modal and wait (worker thread); an interrupt denies."""
        self.flush()
        future: Future = Future()
        self.post(m.PermissionAsked(request, future))
        while True:
            try:
                return future.result(timeout=0.05)
            except FutureTimeout:
                if self.cancel is not None and self.cancel.is_set():
                    future.cancel()
                    return PermissionAnswer("deny", "the user interrupted the session")

    def load_progress(self, p: Progress) -> None:
        """SessionCore's progress callback while the model loads (worker thread)."""
        self.post(m.EngineProgressed(p.what, p.done, p.total))

    def notify(self, text: str) -> None:
        self.post(m.Notice(text))
