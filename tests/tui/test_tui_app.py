"""Pilot tests: the real app, the scripted engine and the real tools in a tmp git project."""
import asyncio
import json
import re
import threading

from agent.core import events as ev
from agent.engines.scripted import ScriptedEngine
from agent.ui.tui.permission_screen import PermissionScreen
from agent.ui.tui.tool_block import ToolBlock
from tui_support import GatedEngine, call, idle, permission_modal, make_app, ready, screen_text, submit, wait_until


def run(app, scenario, size=(100, 40)):
    async def main():
        async with app.run_test(size=size) as pilot:
            await ready(pilot)
            await scenario(pilot)
    asyncio.run(main())


def test_prompt_streams_text_and_shows_compact_tool_blocks(proj):
    app, engine = make_app(proj, [
        {"text": "Let me look at **calc.py**.", "tool_calls": [call("Read", file_path="calc.py")]},
        {"tool_calls": [call("Edit", file_path="calc.py", old_string="return a - b", new_string="return a + b")]},
        {"tool_calls": [call("Bash", command="echo ok; exit 3")]},
        {"tool_calls": [call("TodoWrite", todos=[{"content": "Fix add", "status": "completed"},
                                                  {"content": "Run tests", "status": "in_progress",
                                                   "activeForm": "Running tests"},
                                                  {"content": "Ship", "status": "pending"}])]},
        {"text": "Fixed: `add` now adds."}], permission_mode="bypassPermissions")

    async def scenario(pilot):
        await submit(pilot, "fix add")
        await idle(pilot)
        text = screen_text(app)
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        start = lines.index("> fix add")
        assert lines[start:start + 16] == [
            "> fix add",
            "Let me look at calc.py.",
            "● Read(calc.py)",
            "Read 2 lines",
            "● Edit(calc.py)",
            "Updated calc.py: 1 addition, 1 removal",
            "1   def add(a, b):",
            "2 -     return a - b",
            "2 +     return a + b",
            "● Bash(echo ok; exit 3)",
            lines[start + 10],  # exit code and duration
            "▼ output (1 line)",
            "ok",
            "● TodoWrite(update todos)",
            "☒ Fix add",
            "◼ Running tests",
        ]
        assert lines[start + 10].startswith("exit 3 · ")
        assert "Fixed: add now adds." in lines
        assert lines[-2:] == ["⏵⏵ bypass permissions on (shift+tab to cycle) · ~/proj (main)", lines[-1]]
        assert re.fullmatch(r"scripted · ctx \d\.\dk/32\.8k \(\d%\) · KV reuse 9\d% · TTFT \d\.\d\ds", lines[-1])
    run(app, scenario)
    assert (proj / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert len(engine.requests) == 5


def test_text_is_streamed_while_the_model_generates(proj):
    gate = threading.Event()

    class SlowEngine(ScriptedEngine):
        def stream(self, request, *, cancel=None):
            for e in super().stream(request, cancel=cancel):
                yield e
                gate.wait(5)  # hold after each chunk until the test has looked

    engine = SlowEngine([{"text": "first part, second part, third part"}])
    app, _ = make_app(proj, engine=engine)

    async def scenario(pilot):
        await submit(pilot, "hello")
        await wait_until(pilot, lambda: "first part" in screen_text(app), what="the first chunk")
        assert "third part" not in screen_text(app) and app.busy
        gate.set()
        await idle(pilot)
        assert "first part, second part, third part" in screen_text(app)
    run(app, scenario)


def test_always_allow_stores_the_suggested_rule_and_stops_asking(proj):
    app, engine = make_app(proj, [
        {"tool_calls": [call("Bash", command="git log --oneline")]},
        {"tool_calls": [call("Bash", command="git log -1 --format=%s")]},
        {"text": "The last commit is init."}])

    async def scenario(pilot):
        await submit(pilot, "what is the last commit?")
        shown = await permission_modal(pilot)
        assert "Bash command" in shown and "git log --oneline" in shown
        assert "● Bash(git log --oneline)  waiting for your approval" in shown
        assert "2. Yes, and always allow Bash(git log:*) (.agent/settings.local.json)" in shown
        await pilot.press("2")
        await idle(pilot)
        assert not isinstance(app.screen, PermissionScreen)  # the second git log did not ask
    run(app, scenario)
    settings = json.loads((proj / ".agent" / "settings.local.json").read_text())
    assert settings == {"permissions": {"allow": ["Bash(git log:*)"]}}
    results = [m["content"] for m in app.controller.session.messages if m["role"] == "tool"]
    assert results[0].splitlines()[-1].startswith("[exit code 0,") and results[1].startswith("init\n")


def test_allow_once_runs_the_call_and_stores_nothing(proj):
    app, _ = make_app(proj, [{"tool_calls": [call("Bash", command="touch made.txt")]}, {"text": "Done."}])

    async def scenario(pilot):
        await submit(pilot, "make a file")
        await permission_modal(pilot)
        await pilot.press("1")
        await idle(pilot)
    run(app, scenario)
    assert (proj / "made.txt").exists() and not (proj / ".agent").exists()


def test_deny_with_feedback_tells_the_model_and_leaves_the_file(proj):
    app, engine = make_app(proj, [
        {"tool_calls": [call("Read", file_path="calc.py")]},
        {"tool_calls": [call("Edit", file_path="calc.py", old_string="return a - b", new_string="return a + b")]},
        {"text": "Understood."}])

    async def scenario(pilot):
        await submit(pilot, "fix add")
        shown = await permission_modal(pilot)
        assert "Edit file" in shown and "2 -     return a - b" in shown and "2 +     return a + b" in shown
        await pilot.press("3")
        await pilot.press(*"write a test first", "enter")
        await idle(pilot)
    run(app, scenario)
    assert (proj / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"
    denied = [m["content"] for m in app.controller.session.messages if m["role"] == "tool"][1]
    assert denied == ("Error: permission to use Edit was denied: the user declined it. "
                      "The user says: write a test first")
    assert engine.requests[-1].messages[-1]["content"] == denied


def test_shift_tab_cycles_default_accept_edits_plan(proj):
    app, _ = make_app(proj, [
        {"tool_calls": [call("Write", file_path="plan.txt", content="x\n")]}, {"text": "Planned."}])

    async def scenario(pilot):
        seen = []
        for _ in range(4):
            seen.append((app.controller.mode, screen_text(app).splitlines()[-2].strip().removesuffix(" · ~/proj (main)")))
            await pilot.press("shift+tab")
        assert seen == [("default", "default mode (shift+tab to cycle)"),
                        ("acceptEdits", "⏵⏵ accept edits on (shift+tab to cycle)"),
                        ("plan", "⏸ plan mode on (shift+tab to cycle)"),
                        ("default", "default mode (shift+tab to cycle)")]
        await pilot.press("shift+tab")  # the loop ended on acceptEdits
        assert app.controller.mode == "plan"
        await submit(pilot, "plan it")
        await idle(pilot)
        assert not isinstance(app.screen, PermissionScreen)  # plan mode refuses without asking
    run(app, scenario)
    assert not (proj / "plan.txt").exists()
    result = [m["content"] for m in app.controller.session.messages if m["role"] == "tool"][0]
    assert result.startswith("Error: permission to use Write was denied: Plan mode is on")


def test_escape_interrupts_a_running_bash_and_the_session_continues(proj):
    app, engine = make_app(proj, [
        {"tool_calls": [call("Bash", command="sleep 30")]},
        {"text": "Continuing."}], permission_mode="bypassPermissions")

    async def scenario(pilot):
        await submit(pilot, "wait a while")
        await wait_until(pilot, lambda: any(b.state == "running" for b in app.transcript.blocks.values()),
                         what="the Bash block to run")
        await pilot.press("escape")
        await wait_until(pilot, lambda: "Interrupted · tell the agent what to do instead" in screen_text(app),
                         timeout=5, what="the interrupt")
        shown = screen_text(app)
        assert "● Bash(sleep 30)" in shown and "interrupted" in shown and not app.busy
        await submit(pilot, "go on")
        await idle(pilot)
        assert "Continuing." in screen_text(app)
    run(app, scenario)
    messages = app.controller.session.messages
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "user", "assistant"]
    assert messages[3]["content"].endswith("[Cancelled by the user; the command and its child processes were killed.]")
    assert engine.requests[1].session_id == engine.requests[0].session_id
    assert app.controller.last_usage.reused_tokens > 0  # the next prompt continued the cached prefix


def test_escape_interrupts_generation(proj):
    app, engine = make_app(proj, [{"text": "word " * 60}, {"text": "Back."}], delay_s=0.3)

    async def scenario(pilot):
        await submit(pilot, "talk")
        await wait_until(pilot, lambda: "word" in screen_text(app), what="streaming")
        await pilot.press("escape")
        await wait_until(pilot, lambda: "Interrupted" in screen_text(app), timeout=3, what="the interrupt")
        await submit(pilot, "again")
        await idle(pilot)
    run(app, scenario)
    first = app.controller.session.messages[2]
    assert first["role"] == "assistant" and 0 < first["content"].count("word") < 60


def test_prompts_typed_while_busy_are_queued_and_run_in_order(proj):
    engine = GatedEngine([{"text": "one " * 6}, {"text": "two"}, {"text": "three"}])
    app, _ = make_app(proj, engine=engine)

    async def scenario(pilot):
        await submit(pilot, "first")
        await wait_until(pilot, lambda: app.busy, what="busy")
        await submit(pilot, "second")
        await submit(pilot, "third")
        assert list(app.queue) == ["second", "third"]
        assert "queued: second" in screen_text(app) and "queued: third" in screen_text(app)
        engine.release.set()
        await idle(pilot)
    run(app, scenario)
    users = [m["content"].rsplit("\n\n", 1)[-1] for m in app.controller.session.messages if m["role"] == "user"]
    assert users == ["first", "second", "third"]


def test_escape_puts_queued_prompts_back_into_the_input(proj):
    app, _ = make_app(proj, engine=GatedEngine([{"text": "slow " * 30}]))

    async def scenario(pilot):
        await submit(pilot, "first")
        await wait_until(pilot, lambda: app.busy, what="busy")
        await submit(pilot, "second")
        await pilot.press("escape")
        await idle(pilot)
        assert app.prompt.text == "second" and not app.queue
    run(app, scenario)


def test_ctrl_c_twice_quits(proj):
    app, _ = make_app(proj, [])

    async def scenario(pilot):
        await pilot.press(*"draft")
        await pilot.press("ctrl+c")
        assert app.prompt.text == "" and app.is_running
        assert "press Ctrl+C again to exit" in screen_text(app)
        await pilot.press("ctrl+c")
        await wait_until(pilot, lambda: not app.is_running, what="exit")
    run(app, scenario)
    assert app.return_code == 0


def test_multiline_input_and_persisted_history(proj):
    app, engine = make_app(proj, [{"text": "A."}])

    async def scenario(pilot):
        await submit(pilot, "line one\nline two")
        await idle(pilot)
    run(app, scenario)
    assert engine.requests[0].messages[-1]["content"].endswith("line one\nline two")

    again, _ = make_app(proj, [])

    async def recall(pilot):
        await pilot.press("up")
        assert again.prompt.text == "line one\nline two"
        await pilot.press("down")
        assert again.prompt.text == ""
    run(again, recall)


def test_slash_completion_and_builtin_commands(proj):
    app, _ = make_app(proj, [], allowed=["Bash(make:*)"])

    async def scenario(pilot):
        await pilot.press(*"/he")
        menu = app.query_one("#completion")
        assert menu.display and menu.values == ["/help "]
        await pilot.press("tab")
        assert app.prompt.text == "/help " and not menu.display
        await pilot.press("enter")
        await pilot.pause(0.1)
        shown = screen_text(app)
        assert "/compact [FOCUS] Summarize the conversation to free context" in shown
        await submit(pilot, "/compact")
        await submit(pilot, "/permissions")
        await submit(pilot, "/nosuch")
        await pilot.pause(0.1)
        shown = screen_text(app)
        assert "Cannot compact: there is nothing to compact yet." in shown
        assert "Bash(make:*) (--allowedTools)" in shown
        assert "Unknown command /nosuch. Type /help for the list." in shown
    run(app, scenario, size=(100, 60))


def test_clear_starts_a_new_session(proj):
    app, engine = make_app(proj, [{"text": "Hi."}, {"text": "Fresh."}])

    async def scenario(pilot):
        await submit(pilot, "hello")
        await idle(pilot)
        first = app.controller.session.session_id
        await submit(pilot, "/clear")
        await idle(pilot)
        assert app.controller.session.session_id != first
        assert "hello" not in screen_text(app) and "Started a new conversation." in screen_text(app)
        await submit(pilot, "again")
        await idle(pilot)
    run(app, scenario)
    assert [m["role"] for m in engine.requests[1].messages] == ["system", "user"]


def test_file_mention_completes_and_attaches_the_file(proj):
    app, engine = make_app(proj, [
        {"tool_calls": [call("Edit", file_path="calc.py", old_string="a - b", new_string="a + b")]},
        {"text": "Done."}], permission_mode="acceptEdits")

    async def scenario(pilot):
        await pilot.press(*"fix @cal")
        assert app.query_one("#completion").values == ["@calc.py "]
        await pilot.press("tab")
        assert app.prompt.text == "fix @calc.py "
        await pilot.press("enter")
        await idle(pilot)
    run(app, scenario)
    sent = engine.requests[0].messages[-1]["content"]
    assert sent.endswith('fix @calc.py\n\n<attached-file path="calc.py">\n'
                         '     1\tdef add(a, b):\n     2\t    return a - b\n</attached-file>')
    assert (proj / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"  # attached = read for Edit


def test_continue_replays_the_earlier_conversation(proj):
    first, _ = make_app(proj, [{"text": "Reading.", "tool_calls": [call("Read", file_path="calc.py")]},
                               {"text": "It subtracts."}])

    async def scenario(pilot):
        await submit(pilot, "what does add do?")
        await idle(pilot)
    run(first, scenario)

    again, _ = make_app(proj, [], continue_=True)

    async def look(pilot):
        await pilot.pause(0.1)
        lines = [ln.strip() for ln in screen_text(again).splitlines() if ln.strip()]
        start = lines.index("> what does add do?")
        assert lines[start:start + 5] == ["> what does add do?", "Reading.", "● Read(calc.py)", "Read 2 lines",
                                          "It subtracts."]
    run(again, look)


def test_engine_progress_is_shown_while_prefilling(proj):
    gate = threading.Event()
    app, engine = make_app(proj, [{"text": "Done."}])

    async def scenario(pilot):
        bus = app.controller.agent.bus

        def prefill(e):
            if isinstance(e, ev.UserPromptSubmit):  # the engine would report this during a long prefill
                bus.emit(ev.EngineProgress(what="prefill", done=1536, total=4096))
                gate.wait(5)
        bus.subscribe(prefill)
        await submit(pilot, "go")
        await wait_until(pilot, lambda: "prefill 1536/4096" in screen_text(app), what="the progress line")
        gate.set()
        await idle(pilot)
    run(app, scenario)


def test_a_session_that_cannot_start_exits_with_its_error(proj):
    from agent.cli import CliError
    from agent.ui.tui.app import AgentApp

    def broken(notify, progress):
        raise CliError("cannot load model nope.gguf: no such file")
    app = AgentApp(broken, proj)

    async def main():
        async with app.run_test() as pilot:
            await wait_until(pilot, lambda: not app.is_running, what="exit")
    asyncio.run(main())
    assert (app.return_code, app.error) == (1, "cannot load model nope.gguf: no such file")


def test_tool_block_for_a_failed_call_shows_the_error(proj):
    app, _ = make_app(proj, [{"tool_calls": [call("Read", file_path="missing.py")]}, {"text": "No file."}])

    async def scenario(pilot):
        await submit(pilot, "read it")
        await idle(pilot)
        block = next(iter(app.transcript.blocks.values()))
        assert isinstance(block, ToolBlock) and block.state == "error"
        assert "● Read(missing.py)" in screen_text(app)
    run(app, scenario)


def test_the_transcript_shows_what_the_history_keeps(proj):
    bare = '{"name": "Read", "arguments": {"file_path": "calc.py"}}'  # a small model's call without tags
    app, _ = make_app(proj, [bare, {"text": "It subtracts."}])

    async def scenario(pilot):
        await submit(pilot, "what does add do?")
        await idle(pilot)
        kept = app.controller.session.messages[2]["content"]
        assert ('{"name": "Read"' in screen_text(app)) == (kept != "")  # the loop decides; the screen agrees
        assert "● Read(calc.py)" in screen_text(app)
        # Streamed text that the history replaced is redrawn, or removed when nothing is kept.
        await app.transcript.append_text("draft text")
        await app.transcript.end_text("final text")
        await app.transcript.append_text("dropped text")
        await app.transcript.end_text("")
        await pilot.pause(0.1)
        shown = screen_text(app)
        assert "final text" in shown and "draft text" not in shown and "dropped text" not in shown
    run(app, scenario)
