"""Helpers for the TUI and plain-mode tests: the app on the scripted engine, waiting, the visible screen
as text, and SVG snapshots (UPDATE_SNAPSHOTS=1 rewrites them)."""
from __future__ import annotations

import io
import os
import tempfile
import threading
import time
from pathlib import Path

import pytest
from rich.console import Console

from agent.engines.scripted import ScriptedEngine
from agent.session.builder import build_session
from agent.session.options import SessionOptions

SNAPSHOTS = Path(__file__).parent / "snapshots"


def call(name: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments}


def make_app(proj: Path, turns: list | None = None, *, engine=None, delay_s: float = 0.0, **options):
    """The real app on a scripted engine; returns (app, engine)."""
    from agent.ui.tui.app import AgentApp
    engine = engine or ScriptedEngine(turns or [], delay_s=delay_s)
    opts = SessionOptions(project=proj, engine="scripted", **options)
    app = AgentApp(lambda notify, progress: build_session(opts, engine=engine, notify=notify), proj, opts.initial_prompt)
    return app, engine


async def wait_until(pilot, condition, timeout: float = 10.0, what: str = "a condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}\n{screen_text(pilot.app)}")
        await pilot.pause(0.02)


async def ready(pilot) -> None:
    await wait_until(pilot, lambda: pilot.app.controller is not None, what="the session to start")


async def idle(pilot) -> None:
    """Wait until the agent has nothing running or queued, and the screen has settled."""
    app = pilot.app
    await wait_until(pilot, lambda: app.controller is not None and not app.busy and not app.queue, what="idle")
    await pilot.pause(0.05)


async def submit(pilot, text: str) -> None:
    """Type `text` as keys (newlines as Ctrl+J) and press Enter."""
    keys = ["ctrl+j" if ch == "\n" else ch for ch in text]
    await pilot.press(*keys, "enter")


def screen_text(app) -> str:
    """What the terminal shows, as plain text (the same render the SVG screenshot uses)."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True, color_system="truecolor",
                      record=True, legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text()


def assert_snapshot(app, name: str) -> None:
    """Compare the screen's SVG with tests/tui/snapshots/NAME.svg (UPDATE_SNAPSHOTS=1 writes it)."""
    svg = app.export_screenshot(title="agent")
    path = SNAPSHOTS / f"{name}.svg"
    if os.environ.get("UPDATE_SNAPSHOTS") or not path.exists():
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(svg, encoding="utf-8")
        if not os.environ.get("UPDATE_SNAPSHOTS"):
            pytest.fail(f"snapshot {path.name} was missing and has been written; check it and re-run")
        return
    if svg != path.read_text(encoding="utf-8"):
        actual = Path(tempfile.gettempdir()) / f"agent-snapshot-{name}.svg"
        actual.write_text(svg, encoding="utf-8")
        pytest.fail(f"screen differs from snapshot {path.name}; see {actual} "
                    f"(UPDATE_SNAPSHOTS=1 to accept)\n{screen_text(app)}")


async def permission_modal(pilot) -> str:
    """Wait for the permission modal to be on screen; its text."""
    await wait_until(pilot, lambda: "Do you want to proceed?" in screen_text(pilot.app), what="the permission modal")
    return screen_text(pilot.app)


class GatedEngine(ScriptedEngine):
    """A scripted engine whose first call streams its first chunk, then waits for `release` (or a cancel)."""

    def __init__(self, turns: list, **kw) -> None:
        super().__init__(turns, **kw)
        self.release = threading.Event()

    def stream(self, request, *, cancel=None):
        first = not self.requests
        for i, event in enumerate(super().stream(request, cancel=cancel)):
            yield event
            while first and i == 0 and not self.release.is_set() and not (cancel and cancel.is_set()):
                self.release.wait(0.02)
