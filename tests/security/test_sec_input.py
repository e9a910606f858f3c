"""Security classes 9 and 10: bad input never silently weakens the rules or kills the run.

Class 9: a settings file that cannot be read is a warning always, stops a headless run (naming file and
line) and never half-applies on reload. Class 10: lone surrogates in tool arguments and prompts,
invalid UTF-8 on stdin, damaged transcripts and bad numeric flags end in a result or a one-line error.
Each test checks what is on disk (files the script would have changed, transcripts) afterwards.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from agent.core.transcript import Session
from agent.engines.scripted import ScriptedEngine
from agent.session.builder import build_session
from agent.session.options import BuildError, SessionOptions

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    values = {"AGENT_DATA_DIR": str(tmp_path / "data"), "AGENT_HOME": str(tmp_path / "agenthome"), "HOME": str(home),
              "CLAUDE_CONFIG_DIR": str(tmp_path / "claude")}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return {**os.environ, **values, "PYTHONPATH": str(REPO)}


@pytest.fixture
def proj(tmp_path):
    p = tmp_path / "proj"
    p.mkdir()
    (p / "keep.txt").write_text("precious\n")
    return p


def agent(proj, env, *args, input: bytes | None = None, timeout=60):
    return subprocess.run([sys.executable, "-m", "agent", *args], cwd=proj, env=env, capture_output=True,
                          input=input, stdin=None if input is not None else subprocess.DEVNULL, timeout=timeout)


def scripted(tmp_path, turns) -> list[str]:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(turns))
    return ["--engine", "scripted", "--script", str(path)]


def transcripts(tmp_path) -> list[Path]:
    return sorted((tmp_path / "data").rglob("*.jsonl"))


DELETE_KEEP = [{"text": "", "tool_calls": [{"name": "Bash", "arguments": {"command": "rm keep.txt"}}]},
               {"text": "deleted"}]
DENY_RM = json.dumps({"permissions": {"deny": ["Bash(rm:*)"], "allow": ["Bash"]}})


# ---- class 9: settings files that cannot be read

@pytest.mark.parametrize("where", [".agent/settings.json", ".agent/settings.local.json", ".claude/settings.json",
                                   ".claude/settings.local.json"])
def test_headless_stops_on_a_broken_project_settings_file(tmp_path, proj, env, where):
    path = proj / where
    path.parent.mkdir(exist_ok=True)
    path.write_text('{"permissions": {"deny": ["Bash(rm:*)"],\n  "allow": ["Bash"]\n')  # unterminated
    r = agent(proj, env, "-p", "clean up", "--permission-mode", "bypassPermissions", *scripted(tmp_path, DELETE_KEEP))
    err = r.stderr.decode()
    assert r.returncode == 1 and r.stdout == b""
    assert err == (f"agent: {path}: invalid JSON at line 3 column 1 (Expecting ',' delimiter); fix the file (a run "
                   "without its rules could do what they forbid)\n")
    assert (proj / "keep.txt").read_text() == "precious\n"
    assert transcripts(tmp_path) == []  # stopped before the session started


@pytest.mark.parametrize("which", ["agenthome", "claude"])
def test_headless_stops_on_a_broken_user_settings_file(tmp_path, proj, env, which):
    path = tmp_path / which / "settings.json"
    path.parent.mkdir()
    path.write_text('{"permissions": {"deny": ["Bash(rm:*)"]}')
    r = agent(proj, env, "-p", "clean up", "--permission-mode", "bypassPermissions", *scripted(tmp_path, DELETE_KEEP))
    assert r.returncode == 1
    assert r.stderr.decode().startswith(f"agent: {path}: invalid JSON at line 1 column ")
    assert len(r.stderr.decode().splitlines()) == 1
    assert (proj / "keep.txt").read_text() == "precious\n"


@pytest.mark.parametrize("content, problem", [
    (b"[1, 2]", "expected a JSON object, found list"),
    (b'{"permissions": {"deny": ["\xff"]}}', "cannot read it (UnicodeDecodeError"),
    (b"", "invalid JSON at line 1 column 1 (Expecting value)"),
])
def test_headless_stops_on_settings_that_are_not_an_object(tmp_path, proj, env, content, problem):
    path = proj / ".agent" / "settings.json"
    path.parent.mkdir()
    path.write_bytes(content)
    r = agent(proj, env, "-p", "clean up", "--permission-mode", "bypassPermissions", *scripted(tmp_path, DELETE_KEEP))
    assert r.returncode == 1 and r.stderr.decode().startswith(f"agent: {path}: {problem}")
    assert (proj / "keep.txt").read_text() == "precious\n"


def test_a_valid_settings_file_still_denies(tmp_path, proj, env):
    (proj / ".agent").mkdir()
    (proj / ".agent" / "settings.json").write_text(DENY_RM)
    r = agent(proj, env, "-p", "clean up", *scripted(tmp_path, DELETE_KEEP))
    assert r.returncode == 0 and (proj / "keep.txt").read_text() == "precious\n"


def test_a_malformed_rule_is_a_warning_without_verbose(tmp_path, proj, env):
    (proj / ".agent").mkdir()
    (proj / ".agent" / "settings.json").write_text(json.dumps({"permissions": {"deny": ["Bash(rm:*)", "Bash(oops"]}}))
    r = agent(proj, env, "-p", "hi", *scripted(tmp_path, [{"text": "hello"}]))
    assert (r.returncode, r.stdout) == (0, b"hello\n")
    assert r.stderr.decode() == (f"agent: settings: {proj / '.agent' / 'settings.json'}: ignoring malformed permission "
                                 "rule 'Bash(oops'\n")


def test_interactive_sessions_warn_and_keep_the_other_files_rules(tmp_path, proj, env):
    (proj / ".agent").mkdir()
    (proj / ".agent" / "settings.local.json").write_text("{ nope")
    (proj / ".agent" / "settings.json").write_text(DENY_RM)
    warned, notified = [], []
    core = build_session(SessionOptions(project=proj, engine="scripted"), engine=ScriptedEngine(list(DELETE_KEEP)),
                         notify=notified.append, warn=warned.append)
    try:
        assert warned == [f"settings: ignoring {proj / '.agent' / 'settings.local.json'}: invalid JSON at line 1 "
                          "column 3 (Expecting property name enclosed in double quotes)"]
        core.run("clean up", threading.Event())
        assert (proj / "keep.txt").read_text() == "precious\n"  # the deny rule from the good file held
    finally:
        core.close()


def test_a_reload_with_a_broken_file_keeps_the_rules_in_force(tmp_path, proj, env):
    (proj / ".agent").mkdir()
    settings = proj / ".agent" / "settings.json"
    settings.write_text(DENY_RM)
    notes = []
    core = build_session(SessionOptions(project=proj, engine="scripted"), engine=ScriptedEngine(list(DELETE_KEEP)),
                         notify=notes.append)
    try:
        settings.write_text(DENY_RM[:-5])  # an editor saved half a file
        core.config_changed({str(settings)})
        assert notes[-1] == (f"Configuration not reloaded: {settings} cannot be read now; the previous settings stay "
                             "in force until it is fixed.")
        assert [r.text for r in core.permissions.rules["deny"]] == ["Bash(rm:*)"]
        core.run("clean up", threading.Event())
        assert (proj / "keep.txt").read_text() == "precious\n"
    finally:
        core.close()


def test_a_file_broken_from_the_start_does_not_block_other_reloads(tmp_path, proj, env):
    (proj / ".agent").mkdir()
    (proj / ".agent" / "settings.local.json").write_text("{ nope")
    settings = proj / ".agent" / "settings.json"
    settings.write_text(json.dumps({"permissions": {"allow": ["Read"]}}))
    core = build_session(SessionOptions(project=proj, engine="scripted"), engine=ScriptedEngine(list(DELETE_KEEP)))
    try:
        settings.write_text(DENY_RM)
        core.config_changed({str(settings)})
        assert [r.text for r in core.permissions.rules["deny"]] == ["Bash(rm:*)"]
        core.run("clean up", threading.Event())
        assert (proj / "keep.txt").read_text() == "precious\n"
    finally:
        core.close()


def test_build_session_refuses_headless_with_the_file_and_line(tmp_path, proj, env):
    (proj / ".claude").mkdir()
    (proj / ".claude" / "settings.json").write_text('{\n\n  "permissions": ]\n}')
    with pytest.raises(BuildError) as e:
        build_session(SessionOptions(project=proj, engine="scripted", headless=True), engine=ScriptedEngine([]))
    assert str(e.value).startswith(f"{proj / '.claude' / 'settings.json'}: invalid JSON at line 3 column 18")


# ---- class 10: lone surrogates and invalid UTF-8

def calls(*tool_calls) -> list:
    return [{"text": "", "tool_calls": [{"name": n, "arguments": a} for n, a in tool_calls]}, {"text": "finished"}]


def raw_script(tmp_path, text: str) -> list[str]:
    """A script whose JSON text carries escapes (\\ud800) that json.dumps of a Python str cannot express."""
    path = tmp_path / "script.json"
    path.write_text(text)
    return ["--engine", "scripted", "--script", str(path)]


def surrogate_call(name: str, args_json: str) -> str:
    return '[{"text": "", "tool_calls": [{"name": "%s", "arguments": %s}]}, {"text": "finished"}]' % (name, args_json)


def test_a_lone_surrogate_in_write_content_is_stored_as_replacement(tmp_path, proj, env):
    r = agent(proj, env, "-p", "write", "--permission-mode", "acceptEdits", "--output-format", "json",
              *raw_script(tmp_path, surrogate_call("Write", '{"file_path": "out.txt", "content": "a\\ud800b\\n"}')))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["result"] == "finished"
    assert (proj / "out.txt").read_text(encoding="utf-8") == "a\ufffdb\n"
    for line in transcripts(tmp_path)[0].read_text(encoding="utf-8").splitlines():
        json.loads(line)  # every line still parses


def test_a_lone_surrogate_in_a_bash_command_runs_with_replacement(tmp_path, proj, env):
    r = agent(proj, env, "-p", "run", "--permission-mode", "bypassPermissions", "--output-format", "stream-json",
              *raw_script(tmp_path, surrogate_call("Bash", '{"command": "printf \'x\\udcffy\' > made.txt"}')))
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.decode().splitlines()]
    assert lines[-1]["result"] == "finished"
    assert (proj / "made.txt").read_text(encoding="utf-8") == "x\ufffdy"


def test_a_lone_surrogate_in_edit_strings(tmp_path, proj, env):
    (proj / "a.txt").write_text("one\n")
    script = ('[{"text": "", "tool_calls": [{"name": "Read", "arguments": {"file_path": "a.txt"}}]},'
              ' {"text": "", "tool_calls": [{"name": "Edit", "arguments": {"file_path": "a.txt", '
              '"old_string": "one", "new_string": "t\\udc80o"}}]}, {"text": "finished"}]')
    r = agent(proj, env, "-p", "edit", "--permission-mode", "acceptEdits", *raw_script(tmp_path, script))
    assert (r.returncode, r.stdout) == (0, b"finished\n")
    assert (proj / "a.txt").read_text(encoding="utf-8") == "t\ufffdo\n"


def test_a_lone_surrogate_in_a_path_and_in_the_answer(tmp_path, proj, env):
    script = ('[{"text": "", "tool_calls": [{"name": "Write", "arguments": {"file_path": "f\\ud83d.txt", '
              '"content": "x"}}]}, {"text": "done \\udfff"}]')
    r = agent(proj, env, "-p", "go", "--permission-mode", "acceptEdits", *raw_script(tmp_path, script))
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode("utf-8") == "done \ufffd\n"
    assert (proj / "f\ufffd.txt").read_text() == "x"


def test_invalid_utf8_on_stdin_is_replaced(tmp_path, proj, env):
    r = agent(proj, env, "-p", *scripted(tmp_path, [{"text": "ok"}]), input=b"fix caf\xe9 and \xff\xfe please\n")
    assert (r.returncode, r.stdout) == (0, b"ok\n")
    user = [json.loads(x) for x in transcripts(tmp_path)[0].read_text().splitlines()
            if '"role": "user"' in x][0]["message"]["content"]
    assert user.endswith("fix caf\ufffd and \ufffd\ufffd please\n")


def test_an_undecodable_argv_prompt_is_replaced(tmp_path, proj, env):
    r = subprocess.run([os.fsencode(sys.executable), b"-m", b"agent", b"-p", b"say \xff hi",
                        *[os.fsencode(a) for a in scripted(tmp_path, [{"text": "ok"}])]],
                       cwd=proj, env={**env, "LC_ALL": "C.UTF-8"}, capture_output=True, stdin=subprocess.DEVNULL,
                       timeout=60)
    assert (r.returncode, r.stdout) == (0, b"ok\n"), r.stderr
    assert "say \ufffd hi" in transcripts(tmp_path)[0].read_text(encoding="utf-8")


def test_a_file_name_that_is_not_utf8_is_listed_with_replacement(tmp_path, proj, env):
    bad = os.path.join(os.fsencode(proj), b"bad\xffname.txt")
    with open(bad, "wb") as f:
        f.write(b"x")
    r = agent(proj, env, "-p", "list", "--output-format", "stream-json", *scripted(tmp_path, calls(("LS", {"path": "."}))))
    assert r.returncode == 0, r.stderr
    results = [json.loads(x) for x in r.stdout.decode().splitlines()]
    listing = next(x for x in results if x["type"] == "user")["message"]["content"][0]["content"]
    assert "bad\ufffdname.txt" in listing
    with open(bad, "rb") as f:
        assert f.read() == b"x"


# ---- class 10: damaged transcripts

def saved_session(tmp_path, proj) -> Session:
    s = Session.create(proj, {"model": "m", "engine": "scripted"})
    s.append({"role": "system", "content": "sys"})
    s.append({"role": "user", "content": "héllo wörld"})
    s.append({"role": "assistant", "content": "ünïcode answer"})
    s.close()
    return s


def test_a_transcript_cut_inside_a_character_resumes_with_a_warning(tmp_path, proj, env):
    s = saved_session(tmp_path, proj)
    data = s.transcript_path.read_bytes()
    cut = data.rindex("ï".encode()) + 1  # inside the two bytes of ï
    s.transcript_path.write_bytes(data[:cut])
    back = Session.load(s.transcript_path)
    assert [m["content"] for m in back.messages] == ["sys", "héllo wörld"]
    assert back.warnings == [f"{s.transcript_path.name}: skipped unreadable line 4"]
    back.append({"role": "user", "content": "next"})
    back.close()
    again = Session.load(s.transcript_path)
    assert [m["content"] for m in again.messages] == ["sys", "héllo wörld", "next"]


def test_a_damaged_byte_in_a_middle_line_is_replaced_with_a_warning(tmp_path, proj, env):
    s = saved_session(tmp_path, proj)
    data = s.transcript_path.read_bytes().replace("wörld".encode(), b"w\xffrld")
    s.transcript_path.write_bytes(data)
    back = Session.load(s.transcript_path)
    assert [m["content"] for m in back.messages] == ["sys", "héllo w\ufffdrld", "ünïcode answer"]
    assert back.warnings == [f"{s.transcript_path.name}: line 3 is not valid UTF-8; its undecodable bytes were replaced"]


def test_binary_garbage_and_a_line_separator_in_content(tmp_path, proj, env):
    s = Session.create(proj, {})
    s.append({"role": "user", "content": "a\u2028b\x85c"})  # not line breaks in JSONL
    s.close()
    with open(s.transcript_path, "ab") as f:
        f.write(b"\x00\xff\xfe garbage\n")
    back = Session.load(s.transcript_path)
    assert [m["content"] for m in back.messages] == ["a\u2028b\x85c"]
    assert back.warnings == [f"{s.transcript_path.name}: skipped unreadable line 3"]


def test_resume_from_the_cli_after_damage(tmp_path, proj, env):
    s = saved_session(tmp_path, proj)
    with open(s.transcript_path, "ab") as f:
        f.write('{"type": "message", "message": {"role": "user", "content": "é'.encode()[:-1])
    r = agent(proj, env, "-p", "go on", "--resume", s.session_id, *scripted(tmp_path, [{"text": "resumed"}]))
    assert (r.returncode, r.stdout) == (0, b"resumed\n")
    assert r.stderr.decode() == f"agent: warning: {s.transcript_path.name}: skipped unreadable line 5\n"
    back = Session.load(s.transcript_path)
    assert [m["content"] for m in back.messages][-1] == "resumed"


# ---- class 10: numeric flags

@pytest.mark.parametrize("flag, value, message", [
    ("--max-time", "0", "argument --max-time: '0' is not a positive number of seconds"),
    ("--max-time", "-5", "argument --max-time: '-5' is not a positive number of seconds"),
    ("--max-time", "nan", "argument --max-time: 'nan' is not a positive number of seconds"),
    ("--max-time", "inf", "argument --max-time: 'inf' is not a positive number of seconds"),
    ("--max-time", "1e300", "argument --max-time: '1e300' is not a positive number of seconds"),
    ("--max-time", "soon", "argument --max-time: 'soon' is not a positive number of seconds"),
    ("--max-turns", "0", "argument --max-turns: '0' is not a number of turns from 1 to 100000"),
    ("--max-turns", "-3", "argument --max-turns: '-3' is not a number of turns from 1 to 100000"),
    ("--max-turns", "2.5", "argument --max-turns: '2.5' is not a number of turns from 1 to 100000"),
    ("--tries", "0", "argument --tries: '0' is not a number of tries from 1 to 16"),
    ("--tries", "99", "argument --tries: '99' is not a number of tries from 1 to 16"),
    ("--auto-compact-threshold", "0", "argument --auto-compact-threshold: '0' is not a share of the window (0.8, 80 or 80%)"),
    ("--auto-compact-threshold", "250", "argument --auto-compact-threshold: '250' is not a share of the window (0.8, 80 or 80%)"),
])
def test_numeric_flags_are_validated_in_one_line(tmp_path, proj, env, flag, value, message):
    r = agent(proj, env, "-p", "hi", f"{flag}={value}", *scripted(tmp_path, [{"text": "x"}]))
    assert (r.returncode, r.stdout) == (2, b"")
    assert r.stderr.decode() == f"agent: {message} (agent --help lists the flags)\n"
    assert transcripts(tmp_path) == []


def test_a_small_max_time_stops_the_run_with_a_result(tmp_path, proj, env):
    turns = [{"text": "", "tool_calls": [{"name": "Bash", "arguments": {"command": "sleep 20"}}]}, {"text": "late"}]
    r = agent(proj, env, "-p", "wait", "--max-time", "0.5", "--permission-mode", "bypassPermissions",
              "--output-format", "json", *scripted(tmp_path, turns))
    result = json.loads(r.stdout)
    assert (r.returncode, result["stop_reason"], result["is_error"]) == (1, "timeout", True)
    assert result["result"] == "stopped after the 0.5s wall-clock limit"


@pytest.mark.parametrize("args, code, message", [
    (["--timeout", "nan"], 1, "agent eval: --repeat must be at least 1 and --timeout positive"),
    (["--timeout", "inf"], 1, "agent eval: --repeat must be at least 1 and --timeout positive"),
    (["--repeat", "0"], 1, "agent eval: --repeat must be at least 1 and --timeout positive"),
    (["--repeat", "x"], 2, "agent eval: argument --repeat: invalid int value: 'x' (agent eval --help lists the flags)"),
])
def test_eval_flags_are_validated_in_one_line(tmp_path, proj, env, args, code, message):
    r = agent(proj, env, "eval", *args, "--list", "--out", str(tmp_path / "out"))
    assert (r.returncode, r.stdout, r.stderr.decode()) == (code, b"", message + "\n")
    assert not (tmp_path / "out").exists()
