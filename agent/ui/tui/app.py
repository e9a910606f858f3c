"""The Textual app: `agent` in a repository. One client of the interactive core (agent.interactive).

The session core is built on a worker thread (loading the model can take a while), and every
prompt runs on a worker thread too, so the UI never blocks; the Bridge turns loop events into
messages. Prompts typed while the agent works wait in a queue. Esc interrupts (the next prompt
continues the same session), Shift+Tab cycles the permission mode, Ctrl+C twice quits.
"""
from __future__ import annotations

import asyncio
import signal
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Callable

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import Static

from agent.ui.history import PromptHistory
from agent.core.approval import PermissionAnswer
from agent.session.builder import build_session
from agent.session.core import SessionCore
from agent.session.options import SessionOptions
from agent.session.status import home_relative
from agent.settings import Environment
from agent.ui.slash import SlashRegistry, SlashResult
from agent.ui.tui import messages as m
from agent.ui.tui.activity import ActivityLine
from agent.ui.tui.bridge import FLUSH_S, Bridge
from agent.ui.tui.completion import CompletionMenu
from agent.ui.tui.permission_screen import PermissionScreen
from agent.ui.tui.prompt_input import PromptInput
from agent.ui.tui.status_bar import StatusBar
from agent.ui.tui.transcript import Transcript

CTRL_C_WINDOW_S = 2.0  # a second Ctrl+C within this quits
TICK_S = 0.1  # spinner and elapsed-time refresh while busy
JOIN_ON_EXIT_S = 5.0  # how long quitting waits for an interrupted run to wind down
STATUS_S = 1.0  # status bar refresh while idle (background shells)


class AgentApp(App):
    CSS_PATH = "app.tcss"
    TITLE = "agent"
    BINDINGS = [
        Binding("shift+tab", "cycle_mode", "Cycle mode", show=False, priority=True),
        Binding("ctrl+c", "ctrl_c", "Interrupt / quit", show=False, priority=True),
        Binding("escape", "interrupt", "Interrupt", show=False),
    ]

    def __init__(self, make_controller: Callable[..., SessionCore], project: Path,
                 initial_prompt: str | None = None) -> None:
        """make_controller(notify, progress) builds the session core; it runs on a worker thread."""
        super().__init__()
        self.make_controller = make_controller
        self.project = Path(project)
        self.registry = SlashRegistry(self.project)
        self.history = PromptHistory.for_project(self.project)
        self.controller: SessionCore | None = None
        self.bridge = Bridge(self.post_message)
        self.queue: deque[str] = deque([initial_prompt] if initial_prompt else [])
        self.busy = False
        self.cancel = threading.Event()
        self.error: str | None = None  # why the session could not start; run_tui prints it
        self._worker: threading.Thread | None = None
        self._ctrl_c_at = float("-inf")
        self._hint = ""
        self.clock: Callable[[], float] = time.monotonic  # spinners and elapsed times; snapshots freeze it

    def compose(self) -> ComposeResult:
        yield Transcript(id="transcript")
        yield ActivityLine(id="activity")
        menu = CompletionMenu(id="completion")
        yield menu
        yield PromptInput(self.registry, self.history, menu, id="prompt")
        yield StatusBar(id="status")

    def on_mount(self) -> None:
        self.transcript = self.query_one(Transcript)
        self.activity = self.query_one(ActivityLine)
        self.status_bar = self.query_one(StatusBar)
        self.prompt = self.query_one(PromptInput)
        self.welcome = Static(self._welcome_text(), classes="welcome")
        self.transcript.mount(self.welcome)
        self.status_bar.show(None)
        self.activity.start("Starting the session (loading the model)…")
        self.set_interval(TICK_S, self._tick)
        self.set_interval(FLUSH_S, self.bridge.flush)
        self.set_interval(STATUS_S, self._update_status)  # background shells end while nobody types
        self.prompt.focus()
        self._start_thread(self._build)
        # SIGTERM and SIGHUP (a closed terminal) quit like Ctrl+C twice: the run is cancelled and on_unmount
        # stops every process the session started.
        try:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGHUP):
                loop.add_signal_handler(sig, self._quit)
        except (ValueError, NotImplementedError, RuntimeError):  # not the main thread (tests), or no signals
            pass

    def _welcome_text(self) -> Text:
        model = self.controller.engine.name if self.controller else "loading…"
        out = Text()
        out.append(f"✻ agent · {model}\n", style="bold")
        out.append(f"  {home_relative(self.project)}\n", style="dim")
        out.append("  /help for commands · @ to attach a file · shift+tab to change mode · esc to interrupt",
                   style="dim")
        return out

    # ---- worker threads

    def _start_thread(self, target: Callable[[], None]) -> None:
        self._worker = threading.Thread(target=target, name="agent-worker", daemon=True)
        self._worker.start()

    def _build(self) -> None:
        try:
            controller = self.make_controller(self.bridge.notify, self.bridge.load_progress)
        except Exception as e:  # CliError, EngineError, a bad model file: one line, then exit
            self.post_message(m.ControllerFailed(str(e) or type(e).__name__))
            return
        self.post_message(m.ControllerReady(controller))

    def _work(self, item: str, cancel: threading.Event) -> None:
        try:
            slash, prompt = None, item
            if SlashRegistry.is_command(item):
                slash = self.registry.run(self.controller, item)
                prompt = slash.prompt
            result = self.controller.run(prompt, cancel) if prompt else None
            self.bridge.flush()
            self.post_message(m.RunFinished(result, slash))
        except Exception as e:  # a bug below must not leave the UI busy forever
            self.bridge.flush()
            self.post_message(m.RunFinished(error=f"{type(e).__name__}: {e}"))

    # ---- session lifecycle

    async def on_controller_ready(self, msg: m.ControllerReady) -> None:
        c = self.controller = msg.controller
        c.ask = self.bridge.ask
        c.agent.bus.subscribe(self.bridge)
        self.activity.stop()
        self.welcome.update(self._welcome_text())
        for w in self.registry.warnings + ([self.history.error] if self.history.error else []):
            self.transcript.add_notice(w)
        if c.session.messages:
            await self.transcript.replay(c.session.messages)
        self._update_status()
        self._pump()

    def on_controller_failed(self, msg: m.ControllerFailed) -> None:
        self.error = msg.error
        self.exit(return_code=1)

    def on_unmount(self) -> None:
        self.cancel.set()
        if self._worker is not None and self._worker.is_alive():
            self._worker.join(JOIN_ON_EXIT_S)
        if self.controller is not None:
            self.controller.close()

    # ---- input

    def on_prompt_submitted(self, msg: m.PromptSubmitted) -> None:
        text = msg.text
        self.history.add(text)
        if SlashRegistry.is_command(text):
            found = self.registry.parse(text)
            if found and found[0].name == "exit":
                self._quit()
                return
            if self.controller is not None and (found is None or found[0].immediate):
                self.transcript.add_user(text)
                self._show_slash_now(self.registry.run(self.controller, text))
                return
        self.queue.append(text)
        self._pump()

    def _pump(self) -> None:
        """Start the next queued item when the agent is idle."""
        if not self.busy and self.controller is not None and self.queue:
            item = self.queue.popleft()
            self.busy = True
            self.cancel = threading.Event()
            self.bridge.cancel = self.cancel
            self.transcript.add_user(item)
            self.activity.start("Working…")
            self._start_thread(lambda: self._work(item, self.cancel))
        self.activity.set_queue(list(self.queue))

    # ---- agent events

    async def on_text_chunk(self, msg: m.TextChunk) -> None:
        self.activity.set_progress("", 0, 0)
        await self.transcript.append_text(msg.text)

    async def on_assistant_done(self, msg: m.AssistantDone) -> None:
        await self.transcript.end_text(msg.message.get("content") or "")
        await self.transcript.add_tool_calls(msg.message)

    def on_usage_updated(self, msg: m.UsageUpdated) -> None:
        self._update_status()

    def on_tool_started(self, msg: m.ToolStarted) -> None:
        self.transcript.tool_running(msg.tool_use_id, msg.tool_input)

    def on_tool_finished(self, msg: m.ToolFinished) -> None:
        self.transcript.tool_done(msg.tool_use_id, msg.tool_name, msg.tool_input, msg.result)

    def on_engine_progressed(self, msg: m.EngineProgressed) -> None:
        self.activity.set_progress(msg.what, msg.done, msg.total)

    def on_permission_asked(self, msg: m.PermissionAsked) -> None:
        future = msg.future
        if future.done():  # already given up (interrupted)
            return
        self.bell()
        block = self.transcript.tool_asking(msg.request.tool_name)

        def answered(answer: PermissionAnswer | None) -> None:
            if block is not None and block.state == "asking":
                block.running(block.args)
            if not future.done():
                future.set_result(answer or PermissionAnswer("deny"))
        self.push_screen(PermissionScreen(msg.request), callback=answered)

    def on_notice(self, msg: m.Notice) -> None:
        self.transcript.add_notice(msg.text)

    async def on_run_finished(self, msg: m.RunFinished) -> None:
        await self.transcript.end_text()
        self.busy = False
        self.activity.stop()
        if msg.slash is not None:
            await self._show_slash(msg.slash)
        if msg.error:
            self.transcript.add_notice(f"Error: {msg.error}", "error")
        r = msg.result
        if r is not None and r.stop_reason == "cancelled":
            self.transcript.add_notice("Interrupted · tell the agent what to do instead")
        elif r is not None and r.is_error:
            self.transcript.add_notice(f"Stopped ({r.stop_reason}): {r.error or ''}".rstrip(": "), "error")
        self._update_status()
        self._pump()

    def _show_slash_now(self, res: SlashResult) -> None:
        if res.exit:
            self._quit()
        elif res.text:
            self.transcript.add_markdown(res.text)

    async def _show_slash(self, res: SlashResult) -> None:
        if res.new_transcript:
            await self.transcript.clear()
            self.welcome = Static(self._welcome_text(), classes="welcome")
            await self.transcript.mount(self.welcome)
            await self.transcript.replay(self.controller.session.messages)
        self._show_slash_now(res)

    # ---- keys

    def action_interrupt(self) -> None:
        """Esc: stop the running prompt; queued prompts come back into the input for editing."""
        if not self.busy:
            return
        self.cancel.set()
        self.activity.start("Interrupting…")
        if self.queue and not self.prompt.text.strip():
            self.prompt.load_text("\n".join(self.queue))
            self.queue.clear()
            self.activity.set_queue([])

    def action_cycle_mode(self) -> None:
        if self.controller is not None:
            self.controller.cycle_mode()
            self._update_status()

    def action_ctrl_c(self) -> None:
        now = time.monotonic()
        if now - self._ctrl_c_at < CTRL_C_WINDOW_S:
            self._quit()
            return
        self._ctrl_c_at = now
        if isinstance(self.screen, PermissionScreen):
            self.screen.dismiss(PermissionAnswer("deny"))
        self.action_interrupt()
        self.prompt.clear()
        self._hint = "press Ctrl+C again to exit"
        self._update_status()
        self.set_timer(CTRL_C_WINDOW_S, self._clear_hint)

    def _clear_hint(self) -> None:
        self._hint = ""
        self._update_status()

    def _quit(self) -> None:
        self.cancel.set()
        self.exit(0)

    def _tick(self) -> None:
        if self.busy or self.controller is None:
            self.activity.refresh_line()
            self.transcript.tick()

    def _update_status(self) -> None:
        self.status_bar.show(self.controller.status() if self.controller else None, self._hint)


def run_tui(options: SessionOptions, environment: Environment) -> int:
    """`agent` without -p: the full-screen app. Returns the exit code."""
    app = AgentApp(lambda notify, progress: build_session(options, environment, notify=notify, progress=progress),
                   options.project, options.initial_prompt)
    app.run()
    if app.error:
        print(f"agent: {app.error}", file=sys.stderr)
        return 1
    return app.return_code or 0
