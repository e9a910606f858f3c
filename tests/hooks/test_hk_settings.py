import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from hooks.settings import (HookGroup, PermissionSettings, Settings, SourcedRule, add_allow_rule,
                            load_settings, settings_files)


@pytest.fixture
def dirs(tmp_path):
    """project, ~/.agent and ~/.claude stand-ins."""
    project, user, claude_user = tmp_path / "proj", tmp_path / "home" / ".agent", tmp_path / "home" / ".claude"
    project.mkdir()
    return project, user, claude_user


def write(path: Path, data) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


def test_no_files_gives_empty_settings(dirs):
    project, user, claude_user = dirs
    assert load_settings(project, user, claude_user) == Settings()


def test_precedence_and_unions_across_all_six_files(dirs):
    project, user, claude_user = dirs
    files = {
        "agent_local": project / ".agent/settings.local.json", "claude_local": project / ".claude/settings.local.json",
        "agent_project": project / ".agent/settings.json", "claude_project": project / ".claude/settings.json",
        "agent_user": user / "settings.json", "claude_user": claude_user / "settings.json"}
    for name, path in files.items():
        write(path, {"permissions": {"allow": [f"Bash(echo {name})"], "deny": [f"Read(./{name})"]},
                     "env": {"WHO": name, name.upper(): "1"}, "unknownKey": {"ignored": True}})
    # model and defaultMode only in lower files: the highest that sets them wins
    write(files["claude_project"], {"model": "project-model", "permissions": {"defaultMode": "acceptEdits"},
                                    "env": {"WHO": "claude_project"}})
    write(files["agent_user"], {"model": "user-model", "permissions": {"defaultMode": "plan"}})
    s = load_settings(project, user, claude_user)
    order = ["agent_local", "claude_local", "agent_project", "claude_project", "agent_user", "claude_user"]
    kept = ["agent_local", "claude_local", "agent_project", "claude_user"]  # the two rewritten files lost their rules
    assert s.sources == [files[n] for n in order]
    assert s.permissions == PermissionSettings(
        allow=[SourcedRule(f"Bash(echo {n})", str(files[n])) for n in kept],
        deny=[SourcedRule(f"Read(./{n})", str(files[n])) for n in kept],
        default_mode="acceptEdits")
    assert s.env == {"WHO": "agent_local", "AGENT_LOCAL": "1", "CLAUDE_LOCAL": "1", "AGENT_PROJECT": "1",
                     "CLAUDE_USER": "1"}
    assert s.model == "project-model"
    assert s.warnings == []


def test_hooks_are_concatenated_and_tagged_with_their_file(dirs):
    project, user, claude_user = dirs
    guard = {"type": "command", "command": "\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/guard.sh", "timeout": 30}
    fmt = {"type": "command", "command": "jq -r .tool_input.file_path | xargs ruff format"}
    stop = {"type": "command", "command": ".claude/hooks/require-tests.sh", "extraField": 1}
    a = write(project / ".agent/settings.json", {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [guard]}]}})
    c = write(project / ".claude/settings.json", {"hooks": {
        "PreToolUse": [{"matcher": "Edit|Write", "hooks": [fmt]}], "Stop": [{"hooks": [stop]}]}})
    u = write(claude_user / "settings.json", {"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [guard]}]}})
    s = load_settings(project, user, claude_user)
    assert s.hooks == {
        "PreToolUse": [HookGroup("Bash", [guard], a), HookGroup("Edit|Write", [fmt], c), HookGroup("*", [guard], u)],
        "Stop": [HookGroup("", [stop], c)]}


def test_broken_files_warn_in_one_line_and_the_rest_still_load(dirs):
    project, user, claude_user = dirs
    broken = write(project / ".agent/settings.json", '{"permissions": {"allow": ["Bash(ls)",]}}')
    not_object = write(project / ".claude/settings.json", '["Bash"]')
    good = write(user / "settings.json", {"permissions": {"allow": ["Read"]}, "model": "m"})
    s = load_settings(project, user, claude_user)
    assert s.warnings == [
        f"settings: ignoring {broken}: invalid JSON at line 1 column 39 (Expecting value)",
        f"settings: ignoring {not_object}: expected a JSON object, found list"]
    assert s.sources == [Path(good)]
    assert s.permissions.allow == [SourcedRule("Read", good)]
    assert s.model == "m"


def test_malformed_entries_warn_and_are_skipped(dirs):
    project, user, claude_user = dirs
    f = write(project / ".agent/settings.json", {
        "permissions": {"allow": ["Bash(ls)", 7, "Bash(unclosed", "Edit"], "deny": "Bash", "defaultMode": "yolo",
                        "additionalDirectories": ["../shared", "~/notes"]},
        "hooks": {"PreToolUse": [{"matcher": "Bash"}], "OnMoonrise": [], "Stop": [{"hooks": [{"command": "x"}]}]},
        "env": {"A": 1, "B": True, "C": {"x": 1}}})
    s = load_settings(project, user, claude_user)
    assert s.warnings == [
        f"settings: {f}: ignoring malformed permission rule 7",
        f"settings: {f}: ignoring malformed permission rule 'Bash(unclosed'",
        f"settings: {f}: 'permissions.deny' must be a list of rules; ignored",
        f"settings: {f}: unknown defaultMode 'yolo'; expected one of default, acceptEdits, plan, bypassPermissions, dontAsk",
        f"settings: {f}: malformed PreToolUse hook group; expected {{\"matcher\": ..., \"hooks\": [...]}}",
        f"settings: {f}: hook event 'OnMoonrise' is not supported here; ignored",
        f"settings: {f}: env C must be a string; ignored"]
    assert s.permissions == PermissionSettings(
        allow=[SourcedRule("Bash(ls)", f), SourcedRule("Edit", f)],
        additional_directories=[(project / "../shared").resolve(), Path("~/notes").expanduser().resolve()])
    assert s.hooks == {"Stop": [HookGroup("", [{"command": "x"}], f)]}
    assert s.env == {"A": "1", "B": "true"}


def test_unreadable_file_warns(dirs):
    project, user, claude_user = dirs
    (project / ".agent" / "settings.json").mkdir(parents=True)  # a directory where a file should be
    s = load_settings(project, user, claude_user)
    assert len(s.warnings) == 1
    assert s.warnings[0].startswith(f"settings: ignoring {project / '.agent/settings.json'}: cannot read it (")
    assert s.sources == []


def test_same_file_in_two_scopes_is_read_once(tmp_path):
    """Running in ~ makes ~/.agent/settings.json both the project and the user file."""
    write(tmp_path / ".agent/settings.json", {"permissions": {"allow": ["Read"]}})
    s = load_settings(tmp_path, tmp_path / ".agent", tmp_path / ".claude")
    assert s.permissions.allow == [SourcedRule("Read", str(tmp_path / ".agent/settings.json"))]


def test_user_dirs_are_given_or_default_to_the_home_directory(tmp_path, monkeypatch):
    given = settings_files(tmp_path / "p", tmp_path / "ah", tmp_path / "cc")[4:]
    assert given == [tmp_path / "ah/settings.json", tmp_path / "cc/settings.json"]
    monkeypatch.setenv("AGENT_HOME", str(tmp_path / "ignored"))  # resolved by the CLI, not here
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    assert settings_files(tmp_path / "p")[4:] == [tmp_path / "h/.agent/settings.json", tmp_path / "h/.claude/settings.json"]


def test_broken_settings_never_print_a_traceback(dirs):
    project, user, claude_user = dirs
    write(project / ".agent/settings.local.json", "{nope")
    code = ("import sys; from pathlib import Path; from hooks.settings import load_settings; "
            "print(load_settings(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])).warnings)")
    out = subprocess.run([sys.executable, "-c", code, str(project), str(user), str(claude_user)],
                         capture_output=True, text=True, cwd=Path(__file__).parents[2])
    assert (out.returncode, out.stderr) == (0, "")
    assert "invalid JSON at line 1 column 2" in out.stdout


def test_add_allow_rule_creates_the_file(dirs):
    project, user, claude_user = dirs
    path = add_allow_rule(project, "Bash(npm run test:*)")
    assert path == project / ".agent/settings.local.json"
    assert json.loads(path.read_text()) == {"permissions": {"allow": ["Bash(npm run test:*)"]}}
    assert load_settings(project, user, claude_user).permissions.allow == [SourcedRule("Bash(npm run test:*)", str(path))]


def test_add_allow_rule_keeps_existing_keys_and_skips_duplicates(dirs):
    project, _, _ = dirs
    existing = {"model": "m", "permissions": {"deny": ["Read(./.env)"], "allow": ["Read"], "defaultMode": "plan"},
                "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "x"}]}]}, "env": {"A": "é"}}
    path = Path(write(project / ".agent/settings.local.json", existing))
    add_allow_rule(project, "Bash(git status)")
    add_allow_rule(project, "Bash(git status)")
    assert json.loads(path.read_text(encoding="utf-8")) == {
        **existing, "permissions": {"deny": ["Read(./.env)"], "allow": ["Read", "Bash(git status)"], "defaultMode": "plan"}}
    assert sorted(os.listdir(path.parent)) == ["settings.local.json"]  # no temp file left behind


@pytest.mark.parametrize("content, message", [
    ("{broken", "is not valid JSON"),
    ("[1]", "is not a JSON object"),
    ('{"permissions": {"allow": "Bash"}}', "has a malformed 'permissions' entry"),
])
def test_add_allow_rule_refuses_to_clobber_a_file_it_cannot_read(dirs, content, message):
    project, _, _ = dirs
    path = Path(write(project / ".agent/settings.local.json", content))
    with pytest.raises(ValueError, match=message):
        add_allow_rule(project, "Bash(ls)")
    assert path.read_text() == content


def test_add_allow_rule_rejects_a_malformed_rule(dirs):
    with pytest.raises(ValueError, match="not a permission rule"):
        add_allow_rule(dirs[0], "Bash(ls")
    assert not (dirs[0] / ".agent").exists()


def test_add_allow_rule_reports_an_unreadable_file_in_one_line(dirs):
    project, _, _ = dirs
    (project / ".agent/settings.local.json").mkdir(parents=True)
    with pytest.raises(ValueError, match=r"^cannot add rule: cannot read .*settings.local.json \(Is a directory\)$"):
        add_allow_rule(project, "Bash(ls)")


def test_add_allow_rule_leaves_the_old_file_when_the_write_fails(dirs):
    project, _, _ = dirs
    path = Path(write(project / ".agent/settings.local.json", {"permissions": {"allow": ["Read"]}}))
    if os.geteuid() == 0:
        pytest.skip("root ignores directory permissions")
    path.parent.chmod(stat.S_IRUSR | stat.S_IXUSR)  # read-only directory: the temp file cannot be created
    try:
        with pytest.raises(ValueError, match="cannot add rule: cannot write in"):
            add_allow_rule(project, "Bash(ls)")
    finally:
        path.parent.chmod(stat.S_IRWXU)
    assert json.loads(path.read_text()) == {"permissions": {"allow": ["Read"]}}
