"""`agent --plain`: the prompt-toolkit REPL driven through a pipe input, on the scripted engine and real tools."""
import io
import json
import threading
import time

from prompt_toolkit.document import Document
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from agent.engines.scripted import ScriptedEngine
from agent.session.options import SessionOptions
from agent.ui.plain import PlainRepl, _Completer
from agent.ui.slash import SlashRegistry
from tui_support import GatedEngine, call

ESC, UP, SHIFT_TAB, CTRL_C, CTRL_J = "\x1b", "\x1b[A", "\x1b[Z", "\x03", "\n"


class Repl:
    """A PlainRepl running on a thread, fed through a pipe; `out` collects what it prints."""

    def __init__(self, proj, engine, **options):
        self.out = io.StringIO()
        self.engine = engine
        self._pipe = create_pipe_input()
        self.pipe = self._pipe.__enter__()
        self.repl = PlainRepl(SessionOptions(project=proj, engine="scripted", **options), engine=engine,
                              pt_input=self.pipe, pt_output=DummyOutput(), out=self.out)
        self.code = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        self.code = self.repl.run()

    def send(self, text: str) -> None:
        self.pipe.send_text(text)

    def wait_for(self, text: str, timeout: float = 10.0, count: int = 1) -> str:
        deadline = time.monotonic() + timeout
        while self.out.getvalue().count(text) < count:
            assert time.monotonic() < deadline, f"timed out waiting for {text!r}; output:\n{self.out.getvalue()}"
            time.sleep(0.02)
        return self.out.getvalue()

    def idle(self) -> None:
        deadline = time.monotonic() + 10
        while self.repl.busy or not self.repl.items.empty():
            assert time.monotonic() < deadline, self.out.getvalue()
            time.sleep(0.02)

    def close(self, keys: str = "/exit\r") -> int:
        self.send(keys)
        self.thread.join(10)
        self._pipe.__exit__(None, None, None)
        assert not self.thread.is_alive()
        return self.code


def test_prompt_tool_lines_always_allow_and_commands(proj):
    r = Repl(proj, ScriptedEngine([
        {"text": "Reading it.", "tool_calls": [call("Read", file_path="calc.py")]},
        {"tool_calls": [call("Edit", file_path="calc.py", old_string="a - b", new_string="a + b")]},
        {"text": "Fixed."}]))
    r.send("fix add\r")
    r.wait_for("n [feedback] = deny")
    r.send("a\r")
    r.wait_for("Fixed.")
    r.idle()
    r.send("/cost\r")
    out = r.wait_for("Cost: $0")
    assert r.close() == 0
    body = out[out.index("Reading it."):out.index("Fixed.") + len("Fixed.")]
    assert body == ("Reading it.\n"
                    "● Read(calc.py)\n"
                    "  ⎿ Read 2 lines\n"
                    "● Edit(calc.py)\n"
                    "Permission needed: Edit: calc.py\n"
                    "    @@ -1,2 +1,2 @@\n"
                    "     def add(a, b):\n"
                    "    -    return a - b\n"
                    "    +    return a + b\n"
                    "  Edit of calc.py needs approval.\n"
                    "  y = allow once, a = always allow Edit(./calc.py), n [feedback] = deny\n"
                    "  ⎿ @@ -1,2 +1,2 @@\n"
                    "     def add(a, b):\n"
                    "    -    return a - b\n"
                    "    +    return a + b\n"
                    "Fixed.")
    assert (proj / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert json.loads((proj / ".agent" / "settings.local.json").read_text()) == \
        {"permissions": {"allow": ["Edit(./calc.py)"]}}


def test_deny_with_feedback_reaches_the_model(proj):
    engine = ScriptedEngine([{"tool_calls": [call("Bash", command="rm calc.py")]}, {"text": "OK, keeping it."}])
    r = Repl(proj, engine)
    r.send("clean up\r")
    r.wait_for("n [feedback] = deny")
    r.send("n keep the file\r")
    r.wait_for("OK, keeping it.")
    r.close()
    assert (proj / "calc.py").exists()
    assert engine.requests[-1].messages[-1]["content"] == \
        "Error: permission to use Bash was denied: the user declined it. The user says: keep the file"


def test_prompts_typed_while_busy_are_queued(proj):
    engine = GatedEngine([{"text": "one\n" + "x" * 8}, {"text": "two"}])  # the first chunk is a whole line
    r = Repl(proj, engine)
    r.send("first\r")
    r.wait_for("one")
    r.send("second\r")
    r.wait_for("queued: second")
    engine.release.set()
    r.wait_for("two")
    r.close()
    users = [m["content"].rsplit("\n\n", 1)[-1] for m in r.repl.controller.session.messages if m["role"] == "user"]
    assert users == ["first", "second"]


def test_escape_interrupts_a_running_bash_and_the_session_continues(proj):
    engine = ScriptedEngine([{"tool_calls": [call("Bash", command="sleep 30")]}, {"text": "Next."}])
    r = Repl(proj, engine, permission_mode="bypassPermissions")
    r.send("wait\r")
    r.wait_for("● Bash(sleep 30)")
    time.sleep(0.2)
    started = time.monotonic()
    r.send(ESC)
    r.wait_for("Interrupted · tell the agent what to do instead", timeout=5)
    assert time.monotonic() - started < 4
    r.send("go on\r")
    r.wait_for("Next.")
    r.close()
    assert engine.requests[1].session_id == engine.requests[0].session_id
    assert r.repl.controller.last_usage.reused_tokens > 0


def test_multiline_history_mode_cycle_and_ctrl_c_twice(proj):
    engine = ScriptedEngine([{"text": "A."}, {"text": "B."}])
    r = Repl(proj, engine)
    r.send(f"line one{CTRL_J}line two\r")
    r.wait_for("A.")
    r.idle()
    r.send(SHIFT_TAB)
    r.wait_for("mode: acceptEdits")
    assert r.close(CTRL_C + CTRL_C) == 0
    assert engine.requests[0].messages[-1]["content"].endswith("line one\nline two")

    again = Repl(proj, ScriptedEngine([{"text": "B."}]))
    again.send(UP + "\r")  # the previous prompt, from the persisted history
    again.wait_for("B.")
    again.close()
    assert again.engine.requests[0].messages[-1]["content"].endswith("line one\nline two")


def test_completion_of_commands_and_files(proj):
    completer = _Completer(SlashRegistry(proj))

    def complete(text):
        return [(c.text, c.start_position) for c in completer.get_completions(Document(text), None)]
    assert complete("/he") == [("/help ", -3)]
    assert complete("/re") == [("/rewind ", -3), ("/resume ", -3), ("/review ", -3)]  # built-ins, then skills
    assert complete("look at @cal") == [("@calc.py ", -4)]
    assert complete("plain words") == []
