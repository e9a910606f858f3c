"""Checkpoints in a running session: snapshots before prompts and file-changing batches, /rewind in-process."""
import subprocess
import threading
from pathlib import Path

import pytest

from agent.services.checkpoint_recorder import CheckpointRecorder, rewind
from agent.services.checkpoints import Checkpoints
from agent.engines.scripted import ScriptedEngine, render_prompt
from agent.core.approval import PermissionAnswer
from agent.session.builder import build_session
from agent.session.options import SessionOptions
from agent.core.loop import Agent
from agent.core.transcript import Session
from agent.ui.slash import SlashRegistry
from tools import builtin_tools
from tools.base import ToolContext

ORIGINAL = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"


@pytest.fixture(params=["git", "plain"])
def proj(request, tmp_path, monkeypatch):
    home = tmp_path / "home"
    p = home / "proj"
    p.mkdir(parents=True)
    for name, value in {"HOME": home, "AGENT_DATA_DIR": tmp_path / "data", "AGENT_HOME": tmp_path / "agenthome",
                        "CLAUDE_CONFIG_DIR": tmp_path / "claude"}.items():
        monkeypatch.setenv(name, str(value))
    (p / "calc.py").write_text(ORIGINAL)
    if request.param == "git":
        subprocess.run(["git", "init", "-q", "-b", "main"], cwd=p, check=True)
    return p


def call(name, **arguments):
    return {"name": name, "arguments": arguments}


TURNS = [{"tool_calls": [call("Write", file_path="new.py", content="print('new')\n")]}, {"text": "Created."},
         {"tool_calls": [call("Read", file_path="calc.py")]},
         {"tool_calls": [call("Edit", file_path="calc.py", old_string="a - b", new_string="a + b")]},
         {"text": "Fixed."},
         {"tool_calls": [call("Bash", command="rm calc.py")]}, {"text": "Removed."}]
PROMPTS = ["Create new.py", "Fix add", "Remove calc.py"]


def core(proj, turns, notes=None):
    c = build_session(SessionOptions(project=proj, engine="scripted"), engine=ScriptedEngine(list(turns)),
                    notify=(notes.append if notes is not None else None))
    c.ask = lambda request: PermissionAnswer("once")  # the user approves Write, Edit and Bash
    return c


def run_all(c, prompts):
    for p in prompts:
        assert c.run(p, threading.Event()).stop_reason == "end_turn"


def test_rewind_after_write_edit_and_bash_rm_through_the_interactive_core(proj):
    c = core(proj, TURNS + [{"text": "OK."}, {"text": "Fresh start."}])
    try:
        run_all(c, PROMPTS)
        assert not (proj / "calc.py").exists() and (proj / "new.py").exists()
        found = c.checkpoints()
        assert [(x.meta["kind"], x.label) for x in found] == [
            ("tool", "before Bash (turn 6)"), ("prompt", "Remove calc.py"), ("tool", "before Edit (turn 4)"),
            ("prompt", "Fix add"), ("tool", "before Write (turn 1)"), ("prompt", "Create new.py")]
        third = found[1]
        assert third.meta == {"kind": "prompt", "prompt": "Remove calc.py", "session_id": c.session.session_id,
                              "message_index": 11, "epoch": 0, "kv_tokens": third.meta["kv_tokens"]}
        # The scripted engine's cache then held the first 11 messages exactly (its prompt + reply).
        assert third.meta["kv_tokens"] == len(render_prompt(c.session.messages[:11], c.agent.schemas).split()) - 1
        registry = SlashRegistry(proj)
        listing = registry.run(c, "/rewind").text
        assert listing.splitlines()[0] == "Checkpoints of this session, newest first:"
        assert [ln.split("  ", 2)[2].split(None, 1) for ln in listing.splitlines()[1:7]] == \
            [["tool", "before Bash (turn 6)`"], ["prompt", "Remove calc.py`"], ["tool", "before Edit (turn 4)`"],
             ["prompt", "Fix add`"], ["tool", "before Write (turn 1)`"], ["prompt", "Create new.py`"]]

        # After Bash rm: both code and conversation go back to before the third prompt.
        dropped = c.session.messages[11:]
        assert [m["role"] for m in dropped] == ["user", "assistant", "tool", "user", "assistant"]
        assert dropped[3]["content"] == ("<system-reminder>\nThese files changed on disk since you last read them; "
                                         "Read them again before editing: calc.py\n</system-reminder>")
        res = registry.run(c, f"/rewind {third.short_id}")
        assert (proj / "calc.py").read_text() == FIXED and res.new_transcript
        assert len(c.session.messages) == 11 and c.session.messages[-1] == {"role": "assistant", "content": "Fixed."}
        assert res.text.splitlines()[1:] == ["Conversation rewound to message 11 (5 message(s) dropped).",
                                             "The prompt at that point was: Remove calc.py"]
        result = c.run("Now what?", threading.Event())
        # The KV cache is cut at the checkpoint: everything up to it is reused, nothing re-prefilled.
        assert result.turn_usage[0].reused_tokens == third.meta["kv_tokens"] + 1  # + "<|im_start|>user"
        assert result.turn_usage[0].prefilled_tokens == 3  # "Now", "what?<|im_end|>", "<|im_start|>assistant"

        # After Edit: code only, back to the original; the conversation stays.
        second = next(x for x in found if x.meta.get("prompt") == "Fix add")
        messages = list(c.session.messages)
        undo = c.rewind(second.id, "code").code.backup
        assert (proj / "calc.py").read_text() == ORIGINAL and c.session.messages == messages
        registry.run(c, f"/rewind {undo.short_id} code")  # the rewind itself can be undone
        assert (proj / "calc.py").read_text() == FIXED

        # After Write: back to before the first prompt; the new file is gone and the conversation is empty.
        first = found[-1]
        assert c.rewind(first.id).messages_after == 0
        assert not (proj / "new.py").exists() and (proj / "calc.py").read_text() == ORIGINAL
        assert c.session.messages == [] and c.ctx.read_files == {} and c.ctx.todos == []
        assert c.run("again", threading.Event()).text == "Fresh start."
        # Resuming replays the rewind records: the same conversation comes back.
        assert Session.load(c.session.transcript_path).messages == c.session.messages
    finally:
        c.close()


def test_rewind_to_before_a_compaction_restores_the_full_conversation(proj):
    summary = "## Goal\nx\n## Decisions\n- y\n## Failed approaches\nNone\n## Next step\nz"
    c = core(proj, TURNS[:5] + [summary, {"text": "Back."}])
    try:
        run_all(c, PROMPTS[:2])
        before = list(c.session.messages)
        fix = next(x for x in c.checkpoints() if x.meta.get("prompt") == "Fix add")
        shown = SlashRegistry(proj).run(c, "/compact").text
        assert shown.startswith(f"Compacted (manual) {len(before)} messages: ") and shown.endswith("re-attached calc.py, new.py.")
        assert len(c.session.messages) == 2 and c.session.epoch == 1
        assert c.status().context_used == c.services.guard.last_report.tokens_after
        outcome = c.rewind(fix.id, "conversation")
        assert outcome.code is None and c.session.messages == before[:5] and c.session.epoch == 2
        assert Session.load(c.session.transcript_path).messages == before[:5]
        assert c.run("Fix add", threading.Event()).text == "Back."
    finally:
        c.close()


def test_conversation_only_and_errors(proj):
    c = core(proj, TURNS)
    try:
        run_all(c, PROMPTS[:1])
        registry = SlashRegistry(proj)
        assert registry.run(c, "/rewind abcd1234").text == f"Cannot rewind: no checkpoint abcd1234 for {proj}."
        assert registry.run(c, "/rewind 1 2 3").text.startswith("Usage: `/rewind` to list")
        write = c.checkpoints()[0]
        c.rewind(write.id, "conversation")  # before the Write call: the call and its result are dropped
        assert (proj / "new.py").exists() and [m["role"] for m in c.session.messages] == ["system", "user"]
        other = Checkpoints(proj).snapshot("elsewhere", {"session_id": "other"})
        assert registry.run(c, f"/rewind {other.short_id} conversation").text == (
            f"Cannot rewind: checkpoint {other.short_id} belongs to another session; restore its code with "
            f"`/rewind {other.short_id} code`.")
    finally:
        c.close()


def test_a_failing_snapshot_is_one_warning_and_the_session_goes_on(proj, tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "checkpoints").write_text("not a directory")
    notes = []
    c = core(proj, TURNS, notes)
    try:
        run_all(c, PROMPTS[:2])
        warnings = [n for n in notes if n.startswith("warning: checkpoint not taken")]
        assert len(warnings) == 1 and (proj / "calc.py").read_text() == FIXED
    finally:
        c.close()


def test_checkpoints_are_off_in_the_home_directory(proj, tmp_path):
    home = Path(tmp_path / "home")
    notes = []
    c = core(home, [{"text": "Hi."}], notes)
    try:
        assert notes == [f"warning: checkpoints are off in {home} (the home or root directory: too much to snapshot)"]
        c.run("hi", threading.Event())
        assert SlashRegistry(home).run(c, "/rewind").text == "No checkpoints in this session yet."
    finally:
        c.close()


@pytest.mark.slow
def test_conversation_rewind_reuses_the_kv_cache_on_the_local_engine(proj, tiny_gguf_path, tmp_path):
    from runtime.engine import LocalEngine
    engine = LocalEngine.from_spec(str(tiny_gguf_path), cache_dir=tmp_path / "cache", threads=2)
    agent = Agent(engine, builtin_tools(), Session.create(proj), ToolContext(cwd=proj),
                  system_prompt="You are a test agent.")
    agent.config.sampling.max_tokens = 6
    recorder = CheckpointRecorder(agent, Checkpoints(proj))
    agent.run("First question.")
    agent.run("Second question.")
    cp = next(x for x in recorder.list() if x.meta.get("prompt") == "Second question.")
    agent.run("Third question.")
    rewind(agent, recorder.checkpoints, cp.id, "conversation")
    u = agent.run("Another second question.").turn_usage[0]
    first_turn = engine.builder.render_tokens(agent.session.messages[:2], agent.schemas)
    print(f"after rewind: prompt {u.prompt_tokens}, reused {u.reused_tokens}, prefilled {u.prefilled_tokens}; "
          f"checkpoint kv_tokens {cp.meta['kv_tokens']}, system+tools+first prompt {len(first_turn)}")
    assert u.reused_tokens >= len(first_turn) and u.prefilled_tokens == u.prompt_tokens - u.reused_tokens
