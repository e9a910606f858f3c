"""HookRunner against real bash hooks written into temp dirs."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from hooks.runner import HookError, HookOutcome, HookRunner, matches
from hooks.settings import load_settings


def script(project: Path, name: str, body: str) -> str:
    """Write an executable bash hook under project/hooks and return the command that runs it."""
    path = project / "hooks" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text("#!/usr/bin/env bash\n" + body)
    path.chmod(0o755)
    return f'"$CLAUDE_PROJECT_DIR"/hooks/{name}'


def group(matcher: str, *commands: str, timeout: int | None = None, source: str | None = None) -> dict:
    hooks = [{"type": "command", "command": c} | ({"timeout": timeout} if timeout else {}) for c in commands]
    return {"matcher": matcher, "hooks": hooks} | ({"source": Path(source)} if source else {})


def runner(project: Path, config: dict, env: dict | None = None) -> HookRunner:
    return HookRunner(config, project, "sess-1", str(project / "t.jsonl"), env=env)


BASH_PAYLOAD = {"tool_name": "Bash", "tool_input": {"command": "rm -rf /"}, "tool_use_id": "toolu_1"}


def test_exit_2_blocks_a_tool_call_with_stderr_as_the_reason(tmp_path):
    cmd = script(tmp_path, "guard.sh", 'cat >/dev/null; echo "no rm -rf, please" >&2; exit 2\n')
    out = runner(tmp_path, {"PreToolUse": [group("Bash", cmd)]}).run("PreToolUse", BASH_PAYLOAD)
    assert out.ran[0][:2] == (cmd, 2)
    out.ran = []
    assert out == HookOutcome(blocked=True, reason="no rm -rf, please", permission_decision="deny",
                              permission_reason="no rm -rf, please")


@pytest.mark.parametrize("event", ["PostToolUse", "UserPromptSubmit", "Stop", "SubagentStop"])
def test_exit_2_blocks_the_blocking_events(tmp_path, event):
    cmd = script(tmp_path, "b.sh", 'echo "tests are red" >&2; exit 2\n')
    out = runner(tmp_path, {event: [group("", cmd)]}).run(event, {"tool_name": "Edit"})
    assert (out.blocked, out.reason, out.errors) == (True, "tests are red", [])


def test_exit_2_on_an_event_that_cannot_block_is_a_reported_error(tmp_path):
    cmd = script(tmp_path, "n.sh", 'echo "nope" >&2; exit 2\n')
    out = runner(tmp_path, {"Notification": [group("", cmd)]}).run("Notification", {"message": "hi"})
    assert (out.blocked, out.errors) == (False, [HookError(cmd, "exit 2 cannot block Notification: nope")])


def test_json_decision_block_and_the_older_pretooluse_form(tmp_path):
    block = script(tmp_path, "s.sh", """echo '{"decision": "block", "reason": "run the tests first"}'\n""")
    out = runner(tmp_path, {"Stop": [group("", block)]}).run("Stop", {"stop_hook_active": False})
    assert (out.blocked, out.reason) == (True, "run the tests first")

    approve = script(tmp_path, "a.sh", """echo '{"decision": "approve", "reason": "safe"}'\n""")
    out = runner(tmp_path, {"PreToolUse": [group("Bash", approve)]}).run("PreToolUse", BASH_PAYLOAD)
    assert (out.blocked, out.permission_decision, out.permission_reason) == (False, "allow", "safe")
    out = runner(tmp_path, {"PreToolUse": [group("Bash", block)]}).run("PreToolUse", BASH_PAYLOAD)
    assert (out.blocked, out.permission_decision, out.reason) == (True, "deny", "run the tests first")


def test_updated_input_rewrites_the_tool_call(tmp_path):
    cmd = script(tmp_path, "rw.sh", r"""
jq_in=$(cat)
echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
       "permissionDecisionReason": "rewritten", "updatedInput": {"command": "echo safe"}}}'
""")
    out = runner(tmp_path, {"PreToolUse": [group("Bash", cmd)]}).run("PreToolUse", BASH_PAYLOAD)
    out.ran = []
    assert out == HookOutcome(permission_decision="allow", permission_reason="rewritten",
                              updated_input={"command": "echo safe"})


def test_updated_input_comes_from_the_last_non_denying_hook_in_config_order(tmp_path):
    first = script(tmp_path, "1.sh", """echo '{"hookSpecificOutput": {"updatedInput": {"command": "one"}}}'\n""")
    second = script(tmp_path, "2.sh", """sleep 0.3; echo '{"hookSpecificOutput": {"permissionDecision": "ask",
        "updatedInput": {"command": "two"}}}'\n""")
    out = runner(tmp_path, {"PreToolUse": [group("Bash", second), group("*", first)]}).run("PreToolUse", BASH_PAYLOAD)
    assert (out.updated_input, out.permission_decision) == ({"command": "one"}, "ask")
    deny = script(tmp_path, "d.sh", 'echo denied >&2; exit 2\n')
    out = runner(tmp_path, {"PreToolUse": [group("Bash", first, deny)]}).run("PreToolUse", BASH_PAYLOAD)
    assert (out.updated_input, out.blocked, out.reason) == (None, True, "denied")


def test_deny_beats_allow_from_a_parallel_hook_and_ask_beats_allow(tmp_path):
    allow = script(tmp_path, "allow.sh", """echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "allow", "permissionDecisionReason": "looks fine"}}'\n""")
    deny = script(tmp_path, "deny.sh", """sleep 0.2; echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "deny", "permissionDecisionReason": "touches /"}}'\n""")
    ask = script(tmp_path, "ask.sh", """echo '{"hookSpecificOutput": {"permissionDecision": "ask",
        "permissionDecisionReason": "confirm"}}'\n""")
    out = runner(tmp_path, {"PreToolUse": [group("Bash", allow), group("Bash", deny)]}).run("PreToolUse", BASH_PAYLOAD)
    out.ran = []
    assert out == HookOutcome(blocked=True, reason="touches /", permission_decision="deny",
                              permission_reason="touches /")
    out = runner(tmp_path, {"PreToolUse": [group("Bash", allow, ask)]}).run("PreToolUse", BASH_PAYLOAD)
    assert (out.blocked, out.permission_decision, out.permission_reason) == (False, "ask", "confirm")


def test_additional_context_from_json_and_from_plain_stdout(tmp_path):
    json_ctx = script(tmp_path, "j.sh", """echo '{"hookSpecificOutput": {"hookEventName": "PostToolUse",
        "additionalContext": "ruff: 2 warnings"}}'\n""")
    plain = script(tmp_path, "p.sh", 'echo "Reformatted 1 file"\n')
    out = runner(tmp_path, {"PostToolUse": [group("Edit|Write", json_ctx, plain)]}).run(
        "PostToolUse", {"tool_name": "Write", "tool_input": {}, "tool_response": {}})
    # Plain stdout of a PostToolUse hook is transcript output, not context (as in Claude Code).
    assert (out.additional_context, out.output, out.errors) == ("ruff: 2 warnings", ["Reformatted 1 file"], [])

    branch = script(tmp_path, "b.sh", 'echo "Current branch: main"\n')
    date = script(tmp_path, "d.sh", """echo '{"hookSpecificOutput": {"additionalContext": "Today is Monday"}}'\n""")
    out = runner(tmp_path, {"UserPromptSubmit": [group("", branch, date)]}).run("UserPromptSubmit", {"prompt": "hi"})
    assert (out.additional_context, out.output) == ("Current branch: main\nToday is Monday", [])
    out = runner(tmp_path, {"SessionStart": [group("startup", branch)]}).run("SessionStart", {"source": "startup"})
    assert out.additional_context == "Current branch: main"


def test_continue_false_system_message_and_suppress_output(tmp_path):
    cmd = script(tmp_path, "c.sh", """echo '{"continue": false, "stopReason": "budget spent",
        "systemMessage": "hook says bye", "suppressOutput": true, "someFutureField": 1}'\n""")
    out = runner(tmp_path, {"PostToolUse": [group("", cmd)]}).run("PostToolUse", {"tool_name": "Read"})
    out.ran = []
    assert out == HookOutcome(continue_session=False, stop_reason="budget spent",
                              system_messages=["hook says bye"], suppress_output=True)


def alive_in_group(pgid: int) -> list[int]:
    """Pids of live (non-zombie) processes in a process group, read from /proc."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            pids.append(int(stat.parent.name))
    return pids


def test_a_timed_out_hook_is_killed_with_its_process_group_and_reported(tmp_path):
    cmd = script(tmp_path, "slow.sh", f'echo $$ > {tmp_path}/pid; sleep 30 & sleep 30\n')
    start = time.monotonic()
    out = runner(tmp_path, {"Stop": [group("", cmd, timeout=1)]}).run("Stop", {"stop_hook_active": False})
    elapsed = time.monotonic() - start
    assert 0.9 < elapsed < 2.5
    assert out.errors == [HookError(cmd, "timed out after 1s (killed)")]
    assert (out.blocked, out.ran[0][:2]) == (False, (cmd, None))
    pgid = int((tmp_path / "pid").read_text())
    time.sleep(0.1)
    assert alive_in_group(pgid) == []


def test_crashes_and_bad_output_are_non_blocking_errors(tmp_path):
    crash = script(tmp_path, "crash.sh", 'echo "Traceback: KeyError" >&2; exit 1\n')
    garbage = script(tmp_path, "garbage.sh", "echo '{not json'\n")
    array = script(tmp_path, "array.sh", "echo '[1, 2]'\n")
    badfield = script(tmp_path, "bad.sh", """echo '{"hookSpecificOutput": {"permissionDecision": "maybe"}}'\n""")
    killed = script(tmp_path, "killed.sh", 'kill -9 $$\n')
    cfg = {"PreToolUse": [group("*", crash, garbage, array, badfield, killed)]}
    out = runner(tmp_path, cfg).run("PreToolUse", BASH_PAYLOAD)
    assert out.errors == [
        HookError(crash, "exit 1: Traceback: KeyError"),
        HookError(garbage, "invalid JSON output (Expecting property name enclosed in double quotes at line 1 column 2)"),
        HookError(array, "JSON output must be an object, got list"),
        HookError(badfield, "permissionDecision must be allow, deny or ask (got 'maybe')"),
        HookError(killed, "killed by signal 9"),
    ]
    assert (out.blocked, out.permission_decision, [r[1] for r in out.ran]) == (False, None, [1, 0, 0, 0, -9])


def test_a_command_that_cannot_be_found_is_an_error_not_an_exception(tmp_path):
    out = runner(tmp_path, {"Stop": [group("", "/no/such/hook.sh")]}).run("Stop", {})
    assert out.errors == [HookError("/no/such/hook.sh", "exit 127: bash: line 1: /no/such/hook.sh: No such file or directory")]


@pytest.mark.parametrize("matcher,value,expected", [
    ("Bash", "Bash", True), ("Bash", "BashOutput", False), ("bash", "Bash", False),
    ("Edit|Write", "Write", True), ("Edit|Write", "MultiEdit", False),
    ("Notebook.*", "NotebookEdit", True), (".*Edit", "MultiEdit", True), (".*Edit", "Edits", False),
    ("mcp__memory__.*", "mcp__memory__create", True),
    ("*", "Anything", True), ("", "Anything", True), (None, "Anything", True), ("Read", None, False),
    ("Bad(", "Bad(", True),  # an invalid regex falls back to an exact name
])
def test_matchers(matcher, value, expected):
    assert matches(matcher, value) is expected


def test_only_matching_groups_run_and_events_without_matchers_run_all(tmp_path):
    log = tmp_path / "log"
    def logger(tag):
        return script(tmp_path, f"{tag}.sh", f"echo {tag} >> {log}\n")
    cfg = {"PreToolUse": [group("Edit|Write", logger("ew")), group("Notebook.*", logger("nb")),
                          group("*", logger("star")), group("", logger("empty")), group("Bash", logger("bash"))],
           "Stop": [group("Whatever", logger("stop"))],
           "PreCompact": [group("manual", logger("manual")), group("auto", logger("auto"))]}
    r = runner(tmp_path, cfg)
    ran = [c for c, _, _ in r.run("PreToolUse", {"tool_name": "Write", "tool_input": {}}).ran]
    assert ran == [logger("ew"), logger("star"), logger("empty")]
    ran = [c for c, _, _ in r.run("PreToolUse", {"tool_name": "NotebookEdit"}).ran]
    assert ran == [logger("nb"), logger("star"), logger("empty")]
    assert [c for c, _, _ in r.run("Stop", {}).ran] == [logger("stop")]
    assert [c for c, _, _ in r.run("PreCompact", {"trigger": "auto"}).ran] == [logger("auto")]
    # An explicit match value wins over the payload's.
    assert [c for c, _, _ in r.run("PreCompact", {"trigger": "auto"}, match_value="manual").ran] == [logger("manual")]
    assert r.run("SessionEnd", {"reason": "exit"}) == HookOutcome()


def test_identical_commands_in_several_groups_run_once(tmp_path):
    cmd = script(tmp_path, "once.sh", f"echo x >> {tmp_path}/log\n")
    out = runner(tmp_path, {"PreToolUse": [group("Bash", cmd), group("*", cmd)]}).run("PreToolUse", BASH_PAYLOAD)
    assert (len(out.ran), (tmp_path / "log").read_text()) == (1, "x\n")


def test_matching_hooks_run_in_parallel(tmp_path):
    a = script(tmp_path, "a.sh", "sleep 1\n")
    b = script(tmp_path, "b.sh", "sleep 1\n")
    start = time.monotonic()
    out = runner(tmp_path, {"PostToolUse": [group("*", a), group("Read", b)]}).run("PostToolUse", {"tool_name": "Read"})
    assert time.monotonic() - start < 1.7
    assert [(c, code) for c, code, _ in out.ran] == [(a, 0), (b, 0)]
    assert all(0.9 < d < 1.7 for _, _, d in out.ran)


def test_stdin_holds_exactly_the_common_and_event_fields(tmp_path):
    cmd = script(tmp_path, "dump.sh", f'cat > "{tmp_path}/stdin-$(date +%s%N).json"\n')
    cfg = {e: [group("", cmd)] for e in ("PreToolUse", "PostToolUse", "Stop", "SessionStart")}
    r = runner(tmp_path, cfg)
    common = {"session_id": "sess-1", "transcript_path": str(tmp_path / "t.jsonl"), "cwd": str(tmp_path)}
    cases = [
        ("PreToolUse", BASH_PAYLOAD, "plan"),
        ("PostToolUse", {"tool_name": "Read", "tool_input": {"file_path": "/x"}, "tool_use_id": "toolu_2",
                         "tool_response": {"content": "héllo <|im_start|>", "is_error": False}}, "default"),
        ("Stop", {"stop_hook_active": True}, "acceptEdits"),
        ("SessionStart", {"source": "resume"}, "bypassPermissions"),
    ]
    for event, payload, mode in cases:
        for old in tmp_path.glob("stdin-*.json"):
            old.unlink()
        r.run(event, payload, permission_mode=mode)
        [dumped] = tmp_path.glob("stdin-*.json")
        assert json.loads(dumped.read_text()) == {**common, "permission_mode": mode, "hook_event_name": event,
                                                  **payload}


def test_environment_and_working_directory(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    cmd = script(project, "env.sh",
                 'printf "%s\\n%s\\n%s\\n%s\\n" "$CLAUDE_PROJECT_DIR" "$AGENT_PROJECT_DIR" "$MY_SETTING" "$PWD" >&2; exit 2\n')
    r = runner(project, {"Stop": [group("", cmd)]}, env={"MY_SETTING": "from-settings"})
    r.cwd = project / "sub"  # the reported cwd follows the session; the hook still runs in the root
    out = r.run("Stop", {})
    assert out.reason == f"{project}\n{project}\nfrom-settings\n{project}"


def test_describe_lists_hooks_with_their_source_and_bad_entries_are_warnings(tmp_path):
    cfg = {"PreToolUse": [group("Bash", "guard.sh", source="/p/.claude/settings.json"),
                          {"matcher": "Edit", "hooks": [{"type": "prompt", "prompt": "x"}, {"type": "command"},
                                                        {"command": "t.sh", "timeout": "soon"}]}],
           "Stop": [group("", "stop.sh", source="/home/u/.agent/settings.json"), "junk"],
           "OnFire": [group("", "x.sh")]}
    r = runner(tmp_path, cfg)
    assert r.describe() == [("PreToolUse", "Bash", "guard.sh", Path("/p/.claude/settings.json")),
                            ("PreToolUse", "Edit", "t.sh", None),
                            ("Stop", "", "stop.sh", Path("/home/u/.agent/settings.json"))]
    assert r.warnings == [
        "hooks: PreToolUse hook type 'prompt' is not supported (only `command`)",
        "hooks: PreToolUse hook without a command ignored",
        "hooks: PreToolUse timeout 'soon' is not a positive number; using 60s",
        "hooks: Stop group without a `hooks` list ignored",
        "hooks: unknown event 'OnFire' ignored",
    ]
    with pytest.raises(ValueError):
        r.run("OnFire", {})


def test_hook_stdout_and_stderr_are_decoded_leniently(tmp_path):
    cmd = script(tmp_path, "bin.sh", "printf 'bad \\xff byte' >&2; exit 2\n")
    out = runner(tmp_path, {"UserPromptSubmit": [group("", cmd)]}).run("UserPromptSubmit", {"prompt": "x"})
    assert (out.blocked, out.reason) == (True, "bad \ufffd byte")


def test_no_hooks_means_a_neutral_outcome(tmp_path):
    assert runner(tmp_path, {}).run("PreToolUse", BASH_PAYLOAD) == HookOutcome()
    assert not os.path.exists(tmp_path / "hooks")


def test_hooks_loaded_by_settings_run_unchanged(tmp_path):
    """A Claude Code settings file, read by hooks.settings, drives the runner as written."""
    project, user = tmp_path / "proj", tmp_path / "user"
    (project / ".claude").mkdir(parents=True)
    guard = script(project, "guard.sh", 'grep -q "rm -rf" && { echo "blocked rm -rf" >&2; exit 2; }; exit 0\n')
    settings_file = project / ".claude" / "settings.json"
    settings_file.write_text(json.dumps({"hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": guard, "timeout": 30}]}]}}))
    settings = load_settings(project, user_dir=user, claude_user_dir=user)
    r = HookRunner(settings.hooks, project, "s", "t.jsonl", env=settings.env)
    assert (r.warnings, r.describe()) == ([], [("PreToolUse", "Bash", guard, settings_file)])
    out = r.run("PreToolUse", BASH_PAYLOAD)
    assert (out.blocked, out.reason, out.errors) == (True, "blocked rm -rf", [])
    out = r.run("PreToolUse", {"tool_name": "Bash", "tool_input": {"command": "ls"}})
    assert (out.blocked, out.errors, out.ran[0][1]) == (False, [], 0)
