"""`agent --plain`: a line-mode REPL on prompt-toolkit, the second client of agent.interactive.

The prompt stays live while the agent works on a worker thread, so prompts typed meanwhile are
queued; output is printed above the prompt. Same slash commands, history and completion as
the TUI. Keys: Enter sends, Ctrl+J or Alt+Enter newline, Tab completes `/commands` and
`@files`, Shift+Tab cycles the mode, Esc interrupts, Ctrl+C twice (or Ctrl+D) quits. A
permission request changes the prompt: answer y (once), a (always: the rules shown are
stored), n (deny) or n followed by feedback for the model.
"""
from __future__ import annotations

import json
import queue
import re
import signal
import sys
import threading
import time
from concurrent.futures import Future
from typing import IO, Any

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import Completer, Completion
from prompt_toolkit.history import History
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.patch_stdout import patch_stdout

from agent.core import events as ev
from agent.ui.history import PromptHistory
from agent.core.approval import PermissionAnswer, PermissionRequest
from agent.session.builder import build_session
from agent.session.core import SessionCore
from agent.session.options import SessionOptions
from agent.settings import Environment
from agent.session.status import format_status, home_relative
from agent.ui.slash import SlashRegistry

CTRL_C_WINDOW_S = 2.0
NUMBERED = re.compile(r"^ *\d+\t")  # a line of Read's output
ARG_KEYS = ("file_path", "command", "pattern", "path", "description", "skill")


class _History(History):
    """prompt-toolkit's view of the project's PromptHistory (it stores entries itself)."""

    def __init__(self, history: PromptHistory) -> None:
        super().__init__()
        self.history = history

    def load_history_strings(self):
        return reversed(self.history.entries)  # newest first

    def store_string(self, string: str) -> None:
        self.history.add(string)


class _Completer(Completer):
    def __init__(self, registry: SlashRegistry) -> None:
        self.registry = registry

    def get_completions(self, document, complete_event):
        text = document.text_before_cursor
        if text.startswith("/") and " " not in text and "\n" not in text:
            for c in self.registry.complete(text):
                yield Completion(f"/{c.name} ", start_position=-len(text), display=f"/{c.name}",
                                 display_meta=c.description)
            return
        word = document.get_word_before_cursor(WORD=True)
        if word.startswith("@"):
            for f in self.registry.complete_file(word[1:]):
                yield Completion(f"@{f} ", start_position=-len(word), display=f"@{f}")


class PlainRepl:
    def __init__(self, options: SessionOptions, environment: Environment | None = None, *, engine: Any = None,
                 pt_input: Any = None,
                 pt_output: Any = None, out: IO[str] | None = None) -> None:
        self.options = options
        self.out = out  # None: sys.stdout at write time (patched while the prompt is live)
        self._lock = threading.Lock()
        self._line: list[str] = []  # assistant text not yet ended by a newline
        self.registry = SlashRegistry(options.project)
        self.history = PromptHistory.for_project(options.project)
        self.items: queue.Queue[str | None] = queue.Queue()
        self.busy = False
        self.cancel = threading.Event()
        self.pending: tuple[PermissionRequest, Future] | None = None
        self._ctrl_c_at = float("-inf")
        self.write("Starting the session (loading the model)…\n")
        self._shown_progress: tuple[str, int] | None = None
        self.controller: SessionCore = build_session(
            options, environment or Environment.current(), engine=engine, notify=lambda t: self.write(f"agent: {t}\n"),
            progress=lambda p: self._progress(p.what, p.done, p.total))
        self.controller.ask = self._ask
        self.controller.agent.bus.subscribe(self._on_event)
        self.session = PromptSession(message=self._message, history=_History(self.history),
                                     completer=_Completer(self.registry), key_bindings=self._keys(),
                                     bottom_toolbar=self._toolbar, input=pt_input, output=pt_output,
                                     complete_while_typing=True)
        for w in self.registry.warnings + ([self.history.error] if self.history.error else []):
            self.write(f"agent: {w}\n")

    # ---- output (any thread)

    def write(self, text: str) -> None:
        with self._lock:
            out = self.out or sys.stdout
            out.write(text)
            out.flush()

    def _on_event(self, e: ev.Event) -> None:
        """EventBus subscriber (worker thread): text by whole lines, then one line per tool call/result."""
        if isinstance(e, ev.TextDelta):
            *done, rest = "".join(self._line + [e.text]).split("\n")
            self._line = [rest]
            if done:
                self.write("\n".join(done) + "\n")
            return
        if isinstance(e, ev.AssistantTurn) and not e.message.get("content"):
            self._line = []  # the history dropped it (a tool call written as bare JSON): do not print it
        self._end_text()
        if isinstance(e, ev.AssistantTurn):
            for c in e.message.get("tool_calls") or []:
                self.write(f"● {c['function']['name']}({_arg(c['function']['arguments'])})\n")
        elif isinstance(e, ev.ToolResultEvent):
            self.write(_result_lines(e.tool_name, e.result))
        elif isinstance(e, ev.EngineProgress):
            self._progress(e.what, e.done, e.total)
        elif isinstance(e, ev.PipelineStep):
            self.write(f"  · {e.step}: {e.detail}\n")

    def _progress(self, what: str, done: int, total: int) -> None:
        """Model load and long prefills, a line per tenth at most."""
        step = (what, 10 * done // total if total else 0)
        if step != self._shown_progress:
            self._shown_progress = step
            self.write(f"  {what}: {done}/{total}\n" if total else f"  {what}…\n")

    def _end_text(self) -> None:
        if "".join(self._line):
            self.write("".join(self._line) + "\n")
        self._line = []

    # ---- the worker

    def _work(self) -> None:
        while True:
            item = self.items.get()
            if item is None:
                return
            self.cancel = threading.Event()
            self.busy = True
            try:
                self._run_item(item)
            except Exception as e:  # a bug below must not kill the REPL
                self.write(f"agent: error: {type(e).__name__}: {e}\n")
            finally:
                self.busy = False
                self._invalidate()

    def _run_item(self, item: str) -> None:
        prompt = item
        if SlashRegistry.is_command(item):
            res = self.registry.run(self.controller, item)
            if res.text:
                self.write(res.text + "\n")
            prompt = res.prompt
        if not prompt:
            return
        result = self.controller.run(prompt, self.cancel)
        self._end_text()
        if result.stop_reason == "cancelled":
            self.write("Interrupted · tell the agent what to do instead\n")
        elif result.is_error:
            self.write(f"Stopped ({result.stop_reason}): {result.error or ''}\n")

    def _ask(self, request: PermissionRequest) -> PermissionAnswer:
        """SessionCore.ask (worker thread): the next line typed answers it."""
        future: Future = Future()
        shown = request.tool_input.get("command") or request.tool_input.get("file_path") or json.dumps(
            request.tool_input, ensure_ascii=False)
        lines = [f"Permission needed: {request.tool_name}: {shown}"]
        if request.preview:
            lines += [f"    {ln}" for ln in request.preview.splitlines() if not ln.startswith(("---", "+++"))][:40]
        if request.reason:
            lines.append(f"  {request.reason}")
        lines.append("  y = allow once, " + (f"a = always allow {', '.join(request.rules)}, " if request.rules
                                             else "") + "n [feedback] = deny")
        self.write("\n".join(lines) + "\n")
        self.pending = (request, future)
        self._invalidate()
        try:
            while True:
                try:
                    return future.result(timeout=0.05)
                except TimeoutError:
                    if self.cancel.is_set():
                        return PermissionAnswer("deny", "the user interrupted the session")
        finally:
            self.pending = None
            self._invalidate()

    # ---- the prompt (main thread)

    def _message(self) -> str:
        if self.pending:
            return "allow? (y/a/n) > " if self.pending[0].rules else "allow? (y/n) > "
        return "> "

    def _toolbar(self) -> str:
        state = " · working (esc to interrupt)" if self.busy else ""
        return format_status(self.controller.status()) + state

    def _invalidate(self) -> None:
        app = self.session.app
        if app.is_running:
            app.invalidate()

    def _keys(self) -> KeyBindings:
        kb = KeyBindings()

        @kb.add("c-j")
        @kb.add("escape", "enter")
        def _(event):
            event.current_buffer.insert_text("\n")

        @kb.add("s-tab")
        def _(event):
            self.write(f"mode: {self.controller.cycle_mode()}\n")

        @kb.add("escape")
        def _(event):
            if self.busy:
                self.cancel.set()
                self.write("interrupting…\n")

        return kb

    def run(self) -> int:
        worker = threading.Thread(target=self._work, name="agent-worker", daemon=True)
        worker.start()
        self.write(f"agent · {self.controller.engine.name} · {home_relative(self.options.project)}\n"
                   "/help for commands · Esc interrupts · Ctrl+C twice or Ctrl+D quits\n")
        if self.options.initial_prompt:
            self.items.put(self.options.initial_prompt)
        previous = {}
        if threading.current_thread() is threading.main_thread():
            # SIGTERM and SIGHUP end the REPL like Ctrl+D: the finally below stops the session's processes.
            previous = {sig: signal.signal(sig, _exit_on_signal) for sig in (signal.SIGTERM, signal.SIGHUP)}
        try:
            with patch_stdout(raw=True) if self.out is None else _nothing():
                self._loop()
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)
            self.cancel.set()
            self.items.put(None)
            worker.join(5.0)
            self.controller.close()
        return 0

    def _loop(self) -> None:
        while True:
            try:
                line = self.session.prompt()
            except KeyboardInterrupt:
                now = time.monotonic()
                if now - self._ctrl_c_at < CTRL_C_WINDOW_S:
                    return
                self._ctrl_c_at = now
                if self.busy:
                    self.cancel.set()
                self.write("(press Ctrl+C again to exit)\n")
                continue
            except EOFError:
                return
            if self.pending:
                self._answer(line)
                continue
            if not line.strip():
                continue
            if SlashRegistry.is_command(line):
                found = self.registry.parse(line)
                if found and found[0].name == "exit":
                    return
                if found is None or found[0].immediate:
                    res = self.registry.run(self.controller, line)
                    self.write(res.text + "\n" if res.text else "")
                    continue
            if self.busy or not self.items.empty():
                self.write(f"queued: {line.splitlines()[0]}\n")
            self.items.put(line)

    def _answer(self, line: str) -> None:
        request, future = self.pending
        word, _, rest = line.strip().partition(" ")
        word = word.lower()
        if word in ("y", "yes"):
            answer = PermissionAnswer("once")
        elif word in ("a", "always") and request.rules:
            answer = PermissionAnswer("always")
        elif word in ("n", "no"):
            answer = PermissionAnswer("deny", rest)
        else:  # anything else is what the user wants instead
            answer = PermissionAnswer("deny", line.strip())
        future.set_result(answer)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _arg(args: dict) -> str:
    value = next((args[k] for k in ARG_KEYS if k in args), None)
    text = str(value) if value is not None else json.dumps(args, ensure_ascii=False)
    text = text.splitlines()[0] + " …" if "\n" in text else text
    return text if len(text) <= 100 else text[:99] + "…"


def _result_lines(name: str, result) -> str:
    """The tool result in a few lines: Edit/Write diffs in full, Bash's exit code, else the first line."""
    data = result.data or {}
    lines = result.content.rstrip("\n").splitlines() or [""]
    if result.is_error:
        return f"  ⎿ {lines[0]}\n"  # already "Error: ..." or "Not run: ..."
    if data.get("diff"):
        body = [ln for ln in data["diff"].splitlines() if not ln.startswith(("---", "+++"))]
        return "".join(f"  ⎿ {ln}\n" if i == 0 else f"    {ln}\n" for i, ln in enumerate(body[:60]))
    if name == "Read" and "kind" not in data:
        n = sum(1 for ln in lines if NUMBERED.match(ln))
        return f"  ⎿ Read {n} line{'s' * (n != 1)}\n"
    if name == "Bash" and "exit_code" in data:
        tail = f"exit {data['exit_code']} · {data.get('duration_ms', 0) / 1000:.2f}s"
        shown = lines[:-1][-5:]  # the last output lines, without the status line
        return "".join(f"    {ln}\n" for ln in shown) + f"  ⎿ {tail}\n"
    return f"  ⎿ {lines[0][:200]}" + (f" (+{len(lines) - 1} lines)" if len(lines) > 1 else "") + "\n"


def run_plain(options: SessionOptions, environment: Environment, **kw: Any) -> int:
    """`agent --plain`: the REPL; returns the exit code."""
    return PlainRepl(options, environment, **kw).run()


def _exit_on_signal(signum, frame):
    raise SystemExit(128 + signum)
