"""SVG snapshots of the main screens (tests/tui/snapshots/; UPDATE_SNAPSHOTS=1 rewrites them after a
deliberate change). Timing figures come from the engine below, so the status bar is stable."""
import asyncio

from agent.engines.scripted import ScriptedEngine
from runtime.api import Done
from tui_support import assert_snapshot, call, idle, make_app, permission_modal, ready, submit, wait_until

SIZE = (100, 34)


class SteadyEngine(ScriptedEngine):
    """The scripted engine with fixed figures: speeds change from run to run, token counts whenever the
    system prompt or a tool description is edited."""

    def stream(self, request, *, cancel=None):
        for e in super().stream(request, cancel=cancel):
            if isinstance(e, Done):
                e.usage.prompt_tokens, e.usage.reused_tokens, e.usage.prefilled_tokens = 1200, 1180, 20
                e.usage.generated_tokens = 40
                e.usage.ttft_s, e.usage.decode_tps = 0.42, 18.5
                e.usage.drafted_tokens, e.usage.accepted_tokens = 40, 26
            yield e


def snap(app, scenario, name):
    async def main():
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot)
            app.prompt.cursor_blink = False
            app.clock = lambda: 1000.0  # spinners and elapsed times stand still
            await scenario(pilot)
            await pilot.pause(0.1)
            assert_snapshot(app, name)
    asyncio.run(main())


def test_snapshot_welcome(proj):
    app, _ = make_app(proj, engine=SteadyEngine([]))

    async def scenario(pilot):
        await idle(pilot)
    snap(app, scenario, "welcome")


def test_snapshot_transcript_with_tool_blocks(proj):
    engine = SteadyEngine([
        {"text": "I'll read `calc.py` first.", "tool_calls": [call("Read", file_path="calc.py")]},
        {"tool_calls": [call("Edit", file_path="calc.py", old_string="return a - b", new_string="return a + b")]},
        {"tool_calls": [call("TodoWrite", todos=[{"content": "Fix add", "status": "completed"},
                                                  {"content": "Add a test", "status": "in_progress",
                                                   "activeForm": "Adding a test"}])]},
        {"text": "Fixed:\n\n```python\ndef add(a, b):\n    return a + b\n```"}])
    app, _ = make_app(proj, engine=engine, permission_mode="acceptEdits")

    async def scenario(pilot):
        await submit(pilot, "fix add in calc.py")
        await idle(pilot)
    snap(app, scenario, "transcript")


def test_snapshot_permission_modal(proj):
    engine = SteadyEngine([
        {"tool_calls": [call("Read", file_path="calc.py")]},
        {"tool_calls": [call("Edit", file_path="calc.py", old_string="    return a - b",
                             new_string="    # fixed\n    return a + b")]}])
    app, _ = make_app(proj, engine=engine)

    async def scenario(pilot):
        await submit(pilot, "fix add")
        await permission_modal(pilot)
    snap(app, scenario, "permission")


def test_snapshot_slash_completion(proj):
    app, _ = make_app(proj, engine=SteadyEngine([]))

    async def scenario(pilot):
        await pilot.press("/", "c")
        await wait_until(pilot, lambda: app.query_one("#completion").display, what="the menu")
    snap(app, scenario, "completion")


def test_snapshot_background_shell_in_the_status_bar_and_bashes(proj):
    engine = SteadyEngine([{"text": "Starting the server.",
                            "tool_calls": [call("Bash", command="sleep 60", run_in_background=True)]},
                           {"text": "It runs in the background as bash_1."}])
    app, _ = make_app(proj, engine=engine, permission_mode="bypassPermissions")

    async def scenario(pilot):
        await submit(pilot, "start the server")
        await idle(pilot)
        await submit(pilot, "/bashes")
        await wait_until(pilot, lambda: "background shell (/bashes)" in str(app.status_bar.render()), what="status")
        await idle(pilot)
    try:
        snap(app, scenario, "bashes")
    finally:
        app.controller.ctx.shells.stop_all(grace_s=0.2)
