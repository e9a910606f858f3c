"""`agent rewind`: list, restore code / conversation / both, with real sessions, tools and checkpoints."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from agent.services.checkpoints import Checkpoints
from agent.rewind_cli import conversation_cut, describe, run_rewind
from agent.core.transcript import Session
from tools.base import ToolContext
from tools.bash import BashTool
from tools.read import ReadTool
from tools.write import WriteTool


@pytest.fixture
def env(tmp_path, monkeypatch):
    data = tmp_path / "data"
    monkeypatch.setenv("AGENT_DATA_DIR", str(data))
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "app.py").write_text("print('v1')\n")
    return proj, data


def turn(session: Session, cps: Checkpoints, prompt: str) -> None:
    """What the loop does around a prompt: checkpoint first, then the user message."""
    cps.snapshot(f"prompt: {prompt}", {"kind": "prompt", "prompt": prompt, "session_id": session.session_id,
                                       "message_index": len(session.messages), "kv_tokens": 100})
    session.append({"role": "user", "content": prompt})


def tool_exchange(session: Session, name: str, args: dict, content: str) -> None:
    tid = session.new_tool_id()
    session.append({"role": "assistant", "content": "", "tool_calls": [
        {"id": tid, "type": "function", "function": {"name": name, "arguments": args}}]})
    session.append({"role": "tool", "tool_call_id": tid, "name": name, "content": content})


def two_prompt_session(proj: Path, data: Path):
    """Prompt 1 rewrites app.py; prompt 2 deletes it with Bash and adds a file."""
    session = Session.create(proj)
    cps = Checkpoints(proj, data_dir=data)
    ctx = ToolContext(cwd=proj)
    session.append({"role": "system", "content": "sys"})
    turn(session, cps, "make it print v2")
    ReadTool().run({"file_path": "app.py"}, ctx)
    tool_exchange(session, "Read", {"file_path": "app.py"}, "1\tprint('v1')")
    WriteTool().run({"file_path": "app.py", "content": "print('v2')\n"}, ctx)
    tool_exchange(session, "Write", {"file_path": "app.py", "content": "print('v2')\n"}, "Overwrote app.py")
    session.append({"role": "assistant", "content": "done"})
    turn(session, cps, "replace app.py with main.py")
    BashTool().run({"command": "rm app.py && echo \"print('main')\" > main.py"}, ctx)
    tool_exchange(session, "Bash", {"command": "rm app.py && ..."}, "exit code 0")
    session.append({"role": "assistant", "content": "replaced"})
    session.close()
    return session, cps


def test_list_shows_the_latest_sessions_checkpoints(env, capsys):
    proj, data = env
    session, cps = two_prompt_session(proj, data)
    first, second = cps.list()[::-1]
    assert run_rewind(["--list"], proj, data) == 0
    when = [time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(c.created)) for c in (second, first)]
    assert capsys.readouterr().out == (
        f"Checkpoints of session {session.session_id}, newest first:\n"
        f"  {second.id[:8]}  {when[0]}  prompt  replace app.py with main.py\n"
        f"  {first.id[:8]}  {when[1]}  prompt  make it print v2\n"
        "Restore with: agent rewind ID [--code|--conversation|--both] (default --both)\n")
    assert run_rewind([], proj, data) == 0  # listing is the default
    assert describe(first) in capsys.readouterr().out


def test_list_of_a_resumed_session_and_of_one_without_checkpoints(env, capsys):
    proj, data = env
    session, cps = two_prompt_session(proj, data)
    quiet = Session.create(proj)
    quiet.append({"role": "user", "content": "hi"})
    quiet.close()
    assert run_rewind([], proj, data) == 0
    assert capsys.readouterr().out == f"No checkpoints for session {quiet.session_id}.\n"
    assert run_rewind(["--resume", session.session_id], proj, data) == 0
    assert "make it print v2" in capsys.readouterr().out


def test_code_only_restores_files_and_keeps_the_transcript(env, capsys):
    proj, data = env
    session, cps = two_prompt_session(proj, data)
    first = cps.list()[-1]
    transcript = session.transcript_path.read_bytes()
    assert run_rewind([first.id[:8], "--code"], proj, data) == 0
    backup = cps.list()[0]
    assert capsys.readouterr().out == (f"Code restored to {first.id[:8]}: 1 file(s) written, 1 deleted\n"
                                       f"Undo with: agent rewind {backup.id[:8]} --code\n")
    assert sorted(p.name for p in proj.iterdir()) == ["app.py"]
    assert (proj / "app.py").read_text() == "print('v1')\n"
    assert session.transcript_path.read_bytes() == transcript


def test_conversation_only_appends_a_rewind_record(env, capsys):
    proj, data = env
    session, cps = two_prompt_session(proj, data)
    second = cps.list()[0]
    transcript = session.transcript_path.read_bytes()
    assert run_rewind([second.id, "--conversation"], proj, data) == 0
    assert capsys.readouterr().out == (
        f"Conversation of session {session.session_id} rewound to message 7 (4 message(s) dropped)\n"
        "The prompt at that point was:\n  replace app.py with main.py\n"
        f"Continue with: agent --resume {session.session_id}\n")
    after = session.transcript_path.read_bytes()
    assert after.startswith(transcript)  # append-only
    record = json.loads(after[len(transcript):])
    assert record == {"type": "rewind", "to_message_index": 7, "checkpoint": second.id, "ts": record["ts"]}
    assert sorted(p.name for p in proj.iterdir()) == ["main.py"]  # files untouched


def test_both_is_the_default(env, capsys):
    proj, data = env
    session, cps = two_prompt_session(proj, data)
    first = cps.list()[-1]
    assert run_rewind([first.id[:6]], proj, data) == 0
    out = capsys.readouterr().out
    assert "Code restored to" in out and "rewound to message 1 (10 message(s) dropped)" in out
    assert (proj / "app.py").read_text() == "print('v1')\n" and not (proj / "main.py").exists()
    last = json.loads(session.transcript_path.read_text().splitlines()[-1])
    assert (last["type"], last["to_message_index"]) == ("rewind", 1)


def test_loader_honours_the_rewind_record(env):
    proj, data = env
    session, cps = two_prompt_session(proj, data)
    assert run_rewind([cps.list()[0].id, "--conversation"], proj, data) == 0
    assert [m["content"] for m in Session.load(session.transcript_path).messages] == [
        "sys", "make it print v2", "", "1\tprint('v1')", "", "Overwrote app.py", "done"]


def test_both_fails_before_touching_files_when_the_conversation_cannot_rewind(env, capsys):
    proj, data = env
    session, cps = two_prompt_session(proj, data)
    backup = cps.restore_code(cps.list()[-1].id)  # a "rewind" checkpoint has no conversation position
    files = sorted(p.name for p in proj.iterdir())
    transcript = session.transcript_path.read_bytes()
    assert run_rewind([backup.backup.id], proj, data) == 1
    assert capsys.readouterr().err == (f"agent rewind: checkpoint {backup.backup.id[:8]} has no conversation "
                                       "position; use --code\n")
    assert sorted(p.name for p in proj.iterdir()) == files
    assert session.transcript_path.read_bytes() == transcript


def test_dry_run_shows_what_would_change(env, capsys):
    proj, data = env
    session, cps = two_prompt_session(proj, data)
    first = cps.list()[-1]
    assert run_rewind([first.id, "--dry-run"], proj, data) == 0
    assert capsys.readouterr().out == (f"Restoring {first.id[:8]} would change: 1 re-created, 1 deleted "
                                       "(+1 -1 lines)\n  create  app.py\n  delete  main.py\n")
    assert sorted(p.name for p in proj.iterdir()) == ["main.py"]


def test_rewind_in_a_directory_that_is_not_a_git_repository(env, capsys):
    proj, data = env
    assert not (proj / ".git").exists()
    session, cps = two_prompt_session(proj, data)
    assert run_rewind([cps.list()[-1].id, "--code"], proj, data) == 0
    assert sorted(p.name for p in proj.iterdir()) == ["app.py"]
    assert not (proj / ".git").exists()


def test_errors_are_one_line(env, capsys):
    proj, data = env
    assert run_rewind(["--list"], proj, data) == 1
    assert capsys.readouterr().err == f"agent rewind: no session in {proj} yet\n"
    session, cps = two_prompt_session(proj, data)
    cases = [(["beef"], f"agent rewind: no checkpoint beef for {proj.resolve()}\n"),
             (["xyz"], "agent rewind: not a checkpoint id: 'xyz' (expected 4-40 hex characters)\n"),
             (["--resume", "nope"], f"agent rewind: no session nope (looked under {data / 'projects'})\n"),
             ([cps.list()[0].id, "--resume", "other"],
              f"agent rewind: checkpoint {cps.list()[0].id[:8]} does not belong to session other\n"),
             (["--list", cps.list()[0].id], "agent rewind: give either --list or a checkpoint ID, not both\n")]
    for argv, err in cases:
        assert (run_rewind(argv, proj, data), capsys.readouterr().err) == (1, err)
    assert run_rewind(["abcd", "--code", "--both"], proj, data) == 2  # argparse usage error
    assert "not allowed with argument" in capsys.readouterr().err


def test_conversation_cut_never_leaves_a_call_without_its_result():
    call = {"role": "assistant", "content": "", "tool_calls": [{"id": "toolu_1"}, {"id": "toolu_2"}]}
    messages = [{"role": "system"}, {"role": "user"}, call,
                {"role": "tool", "tool_call_id": "toolu_1"}, {"role": "tool", "tool_call_id": "toolu_2"},
                {"role": "assistant", "content": "done"}]
    assert [conversation_cut(messages, n) for n in range(8)] == [0, 1, 2, 2, 2, 5, 6, 6]


def test_conversation_rewind_to_a_checkpoint_from_before_a_compaction(env, capsys):
    proj, data = env
    session = Session.create(proj)
    cps = Checkpoints(proj, data_dir=data)
    session.append({"role": "system", "content": "sys"})
    session.append({"role": "user", "content": "first"})
    session.append({"role": "assistant", "content": "one"})
    cp = cps.snapshot("prompt: second", {"kind": "prompt", "prompt": "second", "session_id": session.session_id,
                                         "message_index": 3, "epoch": session.epoch, "kv_tokens": 10})
    session.append({"role": "user", "content": "second"})
    session.append({"role": "assistant", "content": "two"})
    session.replace_messages([{"role": "system", "content": "sys"}, {"role": "user", "content": "<state block>"}],
                             {"type": "compaction", "messages": [{"role": "system", "content": "sys"},
                                                                 {"role": "user", "content": "<state block>"}]})
    session.close()
    assert run_rewind([cp.id, "--conversation"], proj, data) == 0
    restored = Session.load(session.transcript_path).messages
    assert restored == [{"role": "system", "content": "sys"}, {"role": "user", "content": "first"},
                        {"role": "assistant", "content": "one"}]
