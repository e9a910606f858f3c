"""Command hooks from settings files, run by hooks.runner through the EventBus, in a real `agent -p` run."""
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

HOOKS = {"hooks": {
    "SessionStart": [{"hooks": [{"type": "command", "command": "echo 'Session note: main is frozen.'"}]}],
    "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "echo 'Project uses tabs.'"}]}],
    "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "echo 'no shell today' >&2; exit 2"}]}],
    "PostToolUse": [{"matcher": "Read", "hooks": [{"type": "command",
                                                   "command": "cat > \"$CLAUDE_PROJECT_DIR\"/post.json"}]}],
    "Stop": [{"hooks": [{"type": "command",
                         "command": "test -f stop.flag || { touch stop.flag; echo 'run the tests first' >&2; exit 2; }"}]}],
}}


def test_hooks_from_settings_shape_a_headless_run(tmp_path):
    proj = tmp_path / "proj"
    (proj / ".claude").mkdir(parents=True)
    (proj / ".claude" / "settings.json").write_text(json.dumps(HOOKS))
    (proj / "a.txt").write_text("alpha\n")
    turns = [{"tool_calls": [{"name": "Bash", "arguments": {"command": "touch x"}},
                             {"name": "Read", "arguments": {"file_path": "a.txt"}}]},
             {"text": "All done."}, {"text": "Tests pass, done."}]
    (tmp_path / "s.json").write_text(json.dumps(turns))
    env = {**os.environ, "AGENT_DATA_DIR": str(tmp_path / "data"), "AGENT_HOME": str(tmp_path / "ah"),
           "HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path / "ch"), "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, "-m", "agent", "-p", "check a.txt", "--output-format", "stream-json",
                        "--allowedTools", "Bash(touch:*)", "--engine", "scripted", "--script", str(tmp_path / "s.json")],
                       cwd=proj, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    sid = lines[0]["session_id"]
    assert not (proj / "x").exists()
    bash_result = lines[2]["message"]["content"][0]
    assert (bash_result["content"], bash_result["is_error"]) == (
        "Error: a PreToolUse hook blocked this Bash call: no shell today", True)
    # The Stop hook sent the model back once; the second answer is the result.
    assert lines[-1]["result"] == "Tests pass, done." and lines[-1]["num_turns"] == 3
    post = json.loads((proj / "post.json").read_text())
    assert {k: post[k] for k in ("session_id", "hook_event_name", "tool_name", "tool_input", "tool_use_id", "cwd",
                                 "permission_mode")} == {
        "session_id": sid, "hook_event_name": "PostToolUse", "tool_name": "Read",
        "tool_input": {"file_path": "a.txt"}, "tool_use_id": "toolu_2", "cwd": str(proj), "permission_mode": "default"}
    assert "alpha" in post["tool_response"]["content"] and post["tool_response"]["is_error"] is False
    assert Path(post["transcript_path"]).name == f"{sid}.jsonl"
    # SessionStart and UserPromptSubmit output became context in the first user message; Stop feedback followed.
    (transcript,) = (tmp_path / "data" / "projects").glob(f"*/{sid}.jsonl")
    users = [json.loads(x)["message"]["content"] for x in transcript.read_text().splitlines()
             if json.loads(x)["type"] == "message" and json.loads(x)["message"]["role"] == "user"]
    assert "<context>\nSession note: main is frozen.\nProject uses tabs.\n</context>\n\ncheck a.txt" in users[0]
    assert users[1] == "Stop hook feedback:\nrun the tests first"
