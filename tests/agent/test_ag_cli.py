"""The `agent` command as a real subprocess (`python -m agent`), driven by the scripted engine."""
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(tmp_path):
    home = tmp_path / "userhome"
    home.mkdir()
    return {**os.environ, "AGENT_DATA_DIR": str(tmp_path / "data"), "AGENT_HOME": str(tmp_path / "agenthome"),
            "HOME": str(home), "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"), "PYTHONPATH": str(REPO)}


@pytest.fixture
def proj(tmp_path):
    p = tmp_path / "proj"
    p.mkdir()
    (p / "notes.txt").write_text("The launch code is 4321.\n")
    return p


def script(tmp_path, turns, name="script.json"):
    path = tmp_path / name
    path.write_text(json.dumps(turns))
    return str(path)


def agent(proj, env, *args, input=None, timeout=60):
    return subprocess.run([sys.executable, "-m", "agent", *args], cwd=proj, env=env, capture_output=True, text=True,
                          input=input, stdin=None if input is not None else subprocess.DEVNULL, timeout=timeout)


READ_THEN_ANSWER = [{"text": "Reading.", "tool_calls": [{"name": "Read", "arguments": {"file_path": "notes.txt"}}]},
                    {"text": "The code is 4321."}]


def test_text_output(tmp_path, proj, env):
    r = agent(proj, env, "-p", "what is the code?", "--engine", "scripted", "--script", script(tmp_path, READ_THEN_ANSWER))
    assert (r.returncode, r.stdout, r.stderr) == (0, "The code is 4321.\n", "")


def test_prompt_from_stdin_and_verbose_trace(tmp_path, proj, env):
    r = agent(proj, env, "-p", "--verbose", "--engine", "scripted", "--script", script(tmp_path, READ_THEN_ANSWER),
              input="what is the code?\n")
    assert (r.returncode, r.stdout) == (0, "The code is 4321.\n")
    lines = r.stderr.splitlines()
    assert lines[0].startswith("[turn 1] tool_use: prompt ") and lines[1] == '  -> Read {"file_path": "notes.txt"}'
    assert lines[2].startswith("  <- Read: ")


def without(d, *keys):
    return {k: v for k, v in d.items() if k not in keys}


def test_stream_json_shapes(tmp_path, proj, env):
    r = agent(proj, env, "-p", "what is the code?", "--output-format", "stream-json", "--engine", "scripted",
              "--script", script(tmp_path, READ_THEN_ANSWER))
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    sid = lines[0]["session_id"]
    assert lines[0] == {"type": "system", "subtype": "init", "session_id": sid, "cwd": str(proj), "model": "scripted",
                        "tools": ["Read", "Grep", "Glob", "LS", "Write", "Edit", "MultiEdit", "Bash", "BashOutput", "KillShell", "TodoWrite", "WebFetch", "Task",
                                  "Skill", "ExitPlanMode"],
                        "mcp_servers": [], "permissionMode": "default"}
    a1 = lines[1]
    assert {**a1, "message": without(a1["message"], "usage")} == {
        "type": "assistant", "session_id": sid, "message": {"role": "assistant", "content": [
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "notes.txt"}}]}}
    u1 = lines[2]
    result_text = u1["message"]["content"][0]["content"]
    assert "The launch code is 4321." in result_text
    assert u1 == {"type": "user", "session_id": sid, "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": result_text, "is_error": False}]}}
    assert {**lines[3], "message": without(lines[3]["message"], "usage")} == {
        "type": "assistant", "session_id": sid, "message": {"role": "assistant", "content": [
            {"type": "text", "text": "The code is 4321."}]}}
    res = lines[4]
    assert without(res, "duration_ms", "usage", "turn_usage") == {
        "type": "result", "subtype": "success", "is_error": False, "num_turns": 2, "result": "The code is 4321.",
        "session_id": sid, "total_cost_usd": 0, "stop_reason": "end_turn"}
    assert len(lines) == 5 and isinstance(res["duration_ms"], int)
    # Usage: per turn on assistant lines, summed on the result; the second turn reuses the whole first call.
    t1, t2 = lines[1]["message"]["usage"], lines[3]["message"]["usage"]
    assert t2["reused_tokens"] == t1["input_tokens"] + t1["output_tokens"] and t1["reused_tokens"] == 0
    assert res["usage"] == {k: t1[k] + t2[k] for k in t1}
    assert [(t["reused_tokens"], t["prefilled_tokens"]) for t in res["turn_usage"]] == [
        (t1["reused_tokens"], t1["prefilled_tokens"]), (t2["reused_tokens"], t2["prefilled_tokens"])]


def test_json_output_and_max_turns(tmp_path, proj, env):
    loop = [{"tool_calls": [{"name": "LS", "arguments": {"path": "."}}]},
            {"tool_calls": [{"name": "Read", "arguments": {"file_path": "notes.txt"}}]}, {"text": "never"}]
    r = agent(proj, env, "-p", "go", "--output-format", "json", "--max-turns", "2", "--engine", "scripted",
              "--script", script(tmp_path, loop))
    assert r.returncode == 1
    (line,) = r.stdout.splitlines()
    res = json.loads(line)
    assert without(res, "duration_ms", "usage", "turn_usage", "session_id") == {
        "type": "result", "subtype": "error_max_turns", "is_error": True, "num_turns": 2,
        "result": "stopped after 2 turns (--max-turns)", "total_cost_usd": 0, "stop_reason": "max_turns"}


def test_headless_denial_reaches_the_model_and_allowed_tools_allow(tmp_path, proj, env):
    turns = [{"tool_calls": [{"name": "Bash", "arguments": {"command": "touch made.txt"}}]}, {"text": "finished"}]
    r = agent(proj, env, "-p", "make a file", "--output-format", "stream-json", "--engine", "scripted",
              "--script", script(tmp_path, turns))
    assert r.returncode == 0 and not (proj / "made.txt").exists()
    block = json.loads(r.stdout.splitlines()[2])["message"]["content"][0]
    assert block["is_error"] is True and block["content"].startswith(
        "Error: permission to use Bash was denied: it needs the user's approval (Bash command needs approval: "
        "`touch made.txt`.), and this is a non-interactive (headless) session.")
    r = agent(proj, env, "-p", "make a file", "--allowedTools", "Bash(touch:*)", "Read", "--engine", "scripted",
              "--script", script(tmp_path, turns))
    assert (r.returncode, r.stdout) == (0, "finished\n") and (proj / "made.txt").exists()


def test_disallowed_bare_tool_is_not_offered(tmp_path, proj, env):
    r = agent(proj, env, "-p", "hi", "--disallowedTools", "Bash,Write", "--output-format", "stream-json",
              "--engine", "scripted", "--script", script(tmp_path, ["hello"]))
    assert json.loads(r.stdout.splitlines()[0])["tools"] == ["Read", "Grep", "Glob", "LS", "Edit", "MultiEdit", "TodoWrite",
                                                              "WebFetch", "Task", "Skill", "ExitPlanMode"]


def transcript_messages(path):
    return [json.loads(x)["message"] for x in Path(path).read_text().splitlines()
            if x.strip() and json.loads(x)["type"] == "message"]


def test_continue_and_resume_restore_the_conversation(tmp_path, proj, env):
    first = agent(proj, env, "-p", "what is the code?", "--output-format", "json", "--engine", "scripted",
                  "--script", script(tmp_path, READ_THEN_ANSWER))
    sid = json.loads(first.stdout)["session_id"]
    other = agent(proj, env, "-p", "unrelated", "--output-format", "json", "--engine", "scripted",
                  "--script", script(tmp_path, ["other session"], "o.json"))
    other_sid = json.loads(other.stdout)["session_id"]
    assert other_sid != sid
    files = list((tmp_path / "data" / "projects").glob(f"*/{sid}.jsonl"))
    before = transcript_messages(files[0])
    # --continue picks the latest session (the unrelated one); --resume picks by id.
    cont = agent(proj, env, "-p", "and again?", "--continue", "--output-format", "json", "--engine", "scripted",
                 "--script", script(tmp_path, ["continued"], "c.json"))
    assert json.loads(cont.stdout)["session_id"] == other_sid
    res = agent(proj, env, "-p", "repeat it", "--resume", sid, "--output-format", "stream-json", "--engine", "scripted",
                "--script", script(tmp_path, ["Still 4321."], "r.json"))
    assert res.returncode == 0, res.stderr
    lines = [json.loads(x) for x in res.stdout.splitlines()]
    assert lines[0]["session_id"] == sid and lines[-1]["session_id"] == sid
    after = transcript_messages(files[0])
    assert after[:len(before)] == before
    assert [m["role"] for m in after[len(before):]] == ["user", "assistant"]
    assert after[-1] == {"role": "assistant", "content": "Still 4321."}
    assert after[len(before)]["content"].endswith("\n\nrepeat it") and "<env>" in after[len(before)]["content"]
    # The resumed request carried the whole earlier conversation: its prompt extends the first run's.
    assert lines[1]["message"]["usage"]["input_tokens"] > json.loads(first.stdout)["turn_usage"][-1]["prompt_tokens"]


def test_torn_transcript_line_is_tolerated(tmp_path, proj, env):
    first = agent(proj, env, "-p", "q", "--output-format", "json", "--engine", "scripted",
                  "--script", script(tmp_path, READ_THEN_ANSWER))
    sid = json.loads(first.stdout)["session_id"]
    (path,) = (tmp_path / "data" / "projects").glob(f"*/{sid}.jsonl")
    with open(path, "a") as f:
        f.write('{"type": "message", "message": {"role": "us')
    r = agent(proj, env, "-p", "again", "--continue", "--engine", "scripted", "--script", script(tmp_path, ["ok"], "2.json"))
    assert (r.returncode, r.stdout) == (0, "ok\n")
    n = len(path.read_text().splitlines())
    assert r.stderr.startswith(f"agent: warning: {sid}.jsonl: skipped unreadable line ")
    assert transcript_messages_tolerant(path)[-1] == {"role": "assistant", "content": "ok"} and n > 8


def transcript_messages_tolerant(path):
    out = []
    for x in Path(path).read_text().splitlines():
        try:
            e = json.loads(x)
        except json.JSONDecodeError:
            continue
        if e["type"] == "message":
            out.append(e["message"])
    return out


@pytest.mark.parametrize("args, message", [
    (["--engine", "scripted"], "agent: --engine scripted needs --script FILE (a JSON list of assistant turns)\n"),
    (["--engine", "scripted", "--script", "missing.json"],
     "agent: cannot read script missing.json: No such file or directory\n"),
    (["--engine", "openai", "--model", "m"], "agent: --engine openai needs --base-url (e.g. http://127.0.0.1:8000/v1)\n"),
    (["--engine", "scripted", "--script", "s.json", "--resume", "nope"], None),
    (["--engine", "scripted", "--script", "s.json", "--continue"], None),
])
def test_configuration_errors_are_one_line(tmp_path, proj, env, args, message):
    (proj / "s.json").write_text('["x"]')
    r = agent(proj, env, "-p", "hi", *args)
    assert r.returncode == 1 and r.stdout == "" and len(r.stderr.splitlines()) == 1 and "Traceback" not in r.stderr
    if message:
        assert r.stderr == message


def test_local_engine_with_a_bad_model_is_one_line(tmp_path, proj, env):
    (proj / "fake.gguf").write_bytes(b"not a gguf")
    r = agent(proj, env, "-p", "hi", "--model", str(proj / "fake.gguf"))
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1 and r.stderr.startswith("agent: ")


def test_no_prompt(tmp_path, proj, env):
    r = agent(proj, env, "-p", "--engine", "scripted", "--script", script(tmp_path, ["x"]), input="")
    assert (r.returncode, r.stderr) == (1, "agent: no prompt: pass -p PROMPT or pipe it on stdin\n")


@pytest.mark.skipif(importlib.util.find_spec("agent.ui.tui.app") is not None, reason="the TUI exists")
def test_without_p_and_without_a_tui(proj, env):
    r = agent(proj, env)
    assert (r.returncode, r.stderr) == (2, "agent: the TUI is not available in this build; use agent -p PROMPT\n")


def test_sigint_stops_cleanly_and_still_prints_a_result(tmp_path, proj, env):
    turns = [{"text": "Waiting.", "tool_calls": [{"name": "Bash", "arguments": {"command": "sleep 30"}}]},
             {"text": "never"}]
    proc = subprocess.Popen([sys.executable, "-m", "agent", "-p", "wait", "--output-format", "stream-json",
                             "--allowedTools", "Bash(sleep:*)", "--engine", "scripted", "--script",
                             script(tmp_path, turns)], cwd=proj, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        lines = [json.loads(proc.stdout.readline()) for _ in range(2)]  # init, then the assistant turn
        assert lines[1]["message"]["content"][1]["input"] == {"command": "sleep 30"}
        time.sleep(0.5)  # let Bash start the command
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert time.monotonic() - t0 < 10
    rest = [json.loads(x) for x in out.splitlines()]
    assert proc.returncode == 1, err
    assert rest[0]["type"] == "user" and rest[0]["message"]["content"][0]["is_error"] is True
    assert without(rest[-1], "duration_ms", "usage", "turn_usage", "session_id") == {
        "type": "result", "subtype": "error_during_execution", "is_error": True, "num_turns": 1,
        "result": "interrupted", "total_cost_usd": 0, "stop_reason": "cancelled"}
    assert "Traceback" not in err
