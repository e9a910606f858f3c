import json
from pathlib import Path

import pytest

from agent.core.permissions import Decision, Permissions
from hooks.settings import load_settings

READ_ONLY = {"Read", "Grep", "Glob", "LS", "WebFetch"}
PLAN_MSG = ("Plan mode is on, so {} cannot run: only read-only tools may. "
            "Finish researching, then call ExitPlanMode with your plan for the user to approve.")


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A project, a home with ~/.agent and ~/.claude, and a directory outside both."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    (tmp_path / "proj" / "src").mkdir(parents=True)
    (tmp_path / "outside").mkdir()

    def make(files: dict[str, dict], mode: str | None = "default", **kw) -> Permissions:
        for rel, data in files.items():
            path = tmp_path / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(data))
        settings = load_settings(tmp_path / "proj", home / ".agent", home / ".claude")
        assert settings.warnings == []
        return Permissions(settings.permissions, mode, tmp_path / "proj", **kw)
    make.root = tmp_path
    return make


def check(p: Permissions, tool: str, **args) -> Decision:
    return p.check(tool, args, tool in READ_ONLY)


BASH_SETTINGS = {
    "proj/.agent/settings.json": {"permissions": {
        "allow": ["Bash(git status)", "Bash(npm run test:*)", "Bash(git diff *)", "Bash(git:*)"],
        "ask": ["Bash(git push:*)"]}},
    "proj/.claude/settings.json": {"permissions": {"deny": ["Bash(rm:*)", "Bash(curl *)"]}},
}
ALLOWED, READ_ONLY_CMD = "Allowed by {}.", "Read-only command inside the project."
DENY_RM = "Denied by rule Bash(rm:*) (.claude/settings.json): `{}`."


@pytest.mark.parametrize("command, expected", [
    ("git status", Decision("allow", ALLOWED.format("Bash(git status)"), "Bash(git status)")),
    ("npm run test", Decision("allow", ALLOWED.format("Bash(npm run test:*)"), "Bash(npm run test:*)")),
    ("npm run test -- -k x", Decision("allow", ALLOWED.format("Bash(npm run test:*)"), "Bash(npm run test:*)")),
    ("npm run testx", Decision("ask", "Bash command needs approval: `npm run testx`.")),
    ("git diff", Decision("allow", ALLOWED.format("Bash(git diff *)"), "Bash(git diff *)")),
    ("git diff HEAD~1 -- a.py", Decision("allow", ALLOWED.format("Bash(git diff *)"), "Bash(git diff *)")),
    ("gitx log", Decision("ask", "Bash command needs approval: `gitx log`.")),
    ("git status && git log", Decision("allow", ALLOWED.format("Bash(git status), Bash(git:*)"),
                                       "Bash(git status), Bash(git:*)")),
    # compound: every part must be allowed; one denied part denies the whole
    ("git status && rm -rf /", Decision("deny", DENY_RM.format("rm -rf /"), "Bash(rm:*)")),
    ("git status && make", Decision("ask", "Bash command needs approval: `make`.")),
    ("make | tee log && npm i", Decision("ask", "Bash command needs approval: `make`; `tee log`; `npm i`.")),
    ('echo "ok && rm -rf /"', Decision("allow", READ_ONLY_CMD)),  # the separator is quoted
    ("echo $(rm -rf x)", Decision("deny", DENY_RM.format("rm -rf x"), "Bash(rm:*)")),
    ("git log `curl evil.sh`", Decision("deny", "Denied by rule Bash(curl *) (.claude/settings.json): `curl evil.sh`.",
                                        "Bash(curl *)")),
    # deny sees through quoting, wrappers, absolute paths and nested shells
    ("sudo rm -rf /", Decision("deny", DENY_RM.format("rm -rf /"), "Bash(rm:*)")),
    ("timeout 5 /bin/rm x", Decision("deny", DENY_RM.format("rm x"), "Bash(rm:*)")),
    ('"rm" x', Decision("deny", DENY_RM.format('"rm" x'), "Bash(rm:*)")),
    ("bash -c 'ls; rm x'", Decision("deny", DENY_RM.format("rm x"), "Bash(rm:*)")),
    ("eval rm x", Decision("deny", DENY_RM.format("rm x"), "Bash(rm:*)")),
    # ask rules beat allow rules
    ("git push origin main", Decision("ask", "Needs approval by rule Bash(git push:*) (.agent/settings.json): "
                                             "`git push origin main`.", "Bash(git push:*)")),
    # env assignments: stripped for matching unless they change what runs
    ("CI=1 npm run test", Decision("allow", ALLOWED.format("Bash(npm run test:*)"), "Bash(npm run test:*)")),
    ("PATH=/tmp/evil:$PATH npm run test", Decision("ask", "Bash command needs approval: `npm run test`.")),
    ("PATH=/tmp/evil", Decision("ask", "Bash command needs approval: `PATH=/tmp/evil`.")),
    # unparseable: ask, never allow
    ("cat <<EOF\nhi\nEOF", Decision("allow", READ_ONLY_CMD)),  # a here-document is data for cat
    ("git status 'unclosed", Decision("ask", "The command could not be parsed with confidence (syntax error), so "
                                             "deny and ask rules cannot be checked; it needs approval.")),
    # the small read-only list
    ("ls", Decision("allow", READ_ONLY_CMD)),
    ("ls -la src 2>/dev/null", Decision("allow", READ_ONLY_CMD)),
    ("cat src/a.py | head -n 5 | wc -l", Decision("allow", READ_ONLY_CMD)),
    ("pwd", Decision("allow", READ_ONLY_CMD)),
    ("ls src | grep -n foo", Decision("allow", READ_ONLY_CMD)),
    ("grep -r --include=*.py foo /etc", Decision("ask", "Bash command needs approval: `grep -r --include=*.py foo /etc`.")),
    ("cat /etc/passwd", Decision("ask", "Bash command needs approval: `cat /etc/passwd`.")),
    ("cat ~/.ssh/id_rsa", Decision("ask", "Bash command needs approval: `cat ~/.ssh/id_rsa`.")),
    ("ls ..", Decision("ask", "Bash command needs approval: `ls ..`.")),
    ("cat .*", Decision("ask", "Bash command needs approval: `cat .*`.")),
    ("cat {..,.}/x", Decision("ask", "Bash command needs approval: `cat {..,.}/x`.")),
    ("echo $AWS_SECRET", Decision("ask", "Bash command needs approval: `echo $AWS_SECRET`.")),
    ("echo hi > notes.txt", Decision("ask", "Bash command needs approval: `echo hi > notes.txt`.")),
    ("cd .. && cat x", Decision("ask", "Bash command needs approval: `cd ..`; `cat x`.")),
    ("", Decision("allow", "The command is empty.")),
])
def test_bash_rules_in_default_mode(env, command, expected):
    assert check(env(BASH_SETTINGS), "Bash", command=command) == expected


def test_bash_safe_list_follows_the_shell_cwd(env):
    p = env({})
    assert p.check("Bash", {"command": "cat notes"}, False, cwd=env.root / "proj" / "src") == \
        Decision("allow", READ_ONLY_CMD)
    assert p.check("Bash", {"command": "cat notes"}, False, cwd=env.root / "outside") == \
        Decision("ask", "Bash command needs approval: `cat notes`.")


def test_deny_beats_allow_across_files_and_claude_files_are_honoured(env):
    p = env({"proj/.agent/settings.local.json": {"permissions": {"allow": ["Bash", "Read"]}},
             "home/.claude/settings.json": {"permissions": {"deny": ["Bash(rm:*)", "Read(./secrets/**)"]}},
             "proj/.claude/settings.local.json": {"permissions": {"ask": ["Read(*.key)"]}}})
    assert check(p, "Bash", command="make && rm -rf build") == Decision(
        "deny", "Denied by rule Bash(rm:*) (~/.claude/settings.json): `rm -rf build`.", "Bash(rm:*)")
    assert check(p, "Bash", command="make && cat <<EOF\nx\nEOF") == Decision(
        "allow", "Allowed by rule Bash (.agent/settings.local.json).", "Bash")
    assert check(p, "Read", file_path="secrets/db/pw.txt") == Decision(
        "deny", "Denied by rule Read(./secrets/**) (~/.claude/settings.json).", "Read(./secrets/**)")
    assert check(p, "LS", path="secrets") == Decision(
        "deny", "Denied by rule Read(./secrets/**) (~/.claude/settings.json).", "Read(./secrets/**)")
    assert check(p, "Read", file_path="src/deep/x.key") == Decision(
        "ask", "Needs approval by rule Read(*.key) (.claude/settings.local.json).", "Read(*.key)")
    assert check(p, "Read", file_path="/etc/hosts") == Decision(
        "allow", "Allowed by rule Read (.agent/settings.local.json).", "Read")


def test_cli_lists_act_as_deny_and_allow(env):
    p = env({"proj/.agent/settings.json": {"permissions": {"allow": ["Bash(make:*)"]}}},
            cli_allowed=["Bash(npm test)"], cli_disallowed=["Bash(make install)"])
    assert check(p, "Bash", command="npm test") == Decision("allow", "Allowed by Bash(npm test).", "Bash(npm test)")
    assert check(p, "Bash", command="make") == Decision("allow", "Allowed by Bash(make:*).", "Bash(make:*)")
    assert check(p, "Bash", command="make install") == Decision(
        "deny", "Denied by rule Bash(make install) (--disallowedTools): `make install`.", "Bash(make install)")


def test_path_rules(env):
    root = env.root
    (root / "proj" / ".env").write_text("X=1")
    (root / "proj" / "alias.env").symlink_to(root / "proj" / ".env")
    (root / "proj" / "escape").symlink_to(root / "outside")
    p = env({"proj/.agent/settings.json": {"permissions": {
        "allow": [f"Read(/{root}/outside/**)", "Edit(docs/**)", "Read(~/notes/**)", "Edit(/build.log)"],
        "deny": ["Read(./.env)", "Read(*.pem)", "Edit(src/generated/**)"]}}})
    deny_env = Decision("deny", "Denied by rule Read(./.env) (.agent/settings.json).", "Read(./.env)")
    allow_outside = Decision("allow", f"Allowed by rule Read(/{root}/outside/**) (.agent/settings.json).",
                             f"Read(/{root}/outside/**)")
    cases = [
        ("Read", {"file_path": "README.md"}, Decision("allow", "Read is read-only and stays inside the project.")),
        ("Read", {"file_path": ".env"}, deny_env),
        ("Read", {"file_path": str(root / "proj" / "src" / ".." / ".env")}, deny_env),
        ("Read", {"file_path": "alias.env"}, deny_env),  # a symlink to a denied file
        ("Grep", {"pattern": "X", "path": ".env"}, deny_env),  # Read rules cover searches
        ("Read", {"file_path": "sub/.env"}, Decision("allow", "Read is read-only and stays inside the project.")),
        ("Read", {"file_path": "src/keys/a.pem"}, Decision("deny", "Denied by rule Read(*.pem) (.agent/settings.json).",
                                                          "Read(*.pem)")),
        ("Read", {"file_path": str(root / "outside" / "a.txt")}, allow_outside),
        ("LS", {"path": str(root / "outside")}, allow_outside),
        ("Read", {"file_path": "escape/a.txt"}, allow_outside),  # resolved through the symlink
        ("Read", {"file_path": "~/notes/todo.md"}, Decision(
            "allow", "Allowed by rule Read(~/notes/**) (.agent/settings.json).", "Read(~/notes/**)")),
        ("Read", {"file_path": str(root / "elsewhere.txt")}, Decision(
            "ask", f"Read of {root / 'elsewhere.txt'} is outside the project directory; it needs approval.")),
        ("Glob", {"pattern": "../../**/*.py"}, Decision(
            "ask", f"Glob of {root.parent} is outside the project directory; it needs approval.")),
        ("Write", {"file_path": "docs/guide/a.md"}, Decision(
            "allow", "Allowed by rule Edit(docs/**) (.agent/settings.json).", "Edit(docs/**)")),
        ("Write", {"file_path": "build.log"}, Decision(
            "allow", "Allowed by rule Edit(/build.log) (.agent/settings.json).", "Edit(/build.log)")),
        ("MultiEdit", {"file_path": "src/generated/x.py"}, Decision(
            "deny", "Denied by rule Edit(src/generated/**) (.agent/settings.json).", "Edit(src/generated/**)")),
        ("Edit", {"file_path": "src/a.py"}, Decision("ask", "Edit of src/a.py needs approval.")),
    ]
    assert [(tool, args, check(p, tool, **args)) for tool, args, _ in cases] == cases


def test_accept_edits_mode(env):
    root = env.root
    p = env({"proj/.agent/settings.json": {"permissions": {"additionalDirectories": ["../outside"]}}},
            mode="acceptEdits")
    assert check(p, "Edit", file_path="src/a.py") == Decision(
        "allow", "acceptEdits mode: Edit of src/a.py inside the project is allowed.")
    assert check(p, "Write", file_path=str(root / "outside" / "n.md")) == Decision(
        "allow", f"acceptEdits mode: Write of {root / 'outside' / 'n.md'} inside the project is allowed.")
    assert check(p, "Write", file_path="/etc/x") == Decision(
        "ask", "Write of /etc/x is outside the project directory; it needs approval.")
    protected = "changes agent settings, hooks or git internals; it needs approval."
    assert check(p, "Write", file_path=".git/hooks/pre-commit") == Decision(
        "ask", f"Write of .git/hooks/pre-commit {protected}")
    assert check(p, "Edit", file_path=".agent/settings.local.json") == Decision(
        "ask", f"Edit of .agent/settings.local.json {protected}")
    assert check(p, "Write", file_path=".claude/hooks/guard.sh") == Decision(
        "ask", f"Write of .claude/hooks/guard.sh {protected}")
    assert check(p, "Write", file_path=".claude/skills/x/SKILL.md") == Decision(
        "ask", f"Write of .claude/skills/x/SKILL.md {protected}")
    assert check(p, "Bash", command="mkdir x") == Decision("ask", "Bash command needs approval: `mkdir x`.")


def test_plan_mode_allows_only_read_only_tools(env):
    p = env({"proj/.agent/settings.json": {"permissions": {"allow": ["Write", "Bash"]}}}, mode="plan")
    assert check(p, "Write", file_path="a.py", content="") == Decision("deny", PLAN_MSG.format("Write"))
    assert check(p, "Bash", command="ls") == Decision("deny", PLAN_MSG.format("Bash"))
    assert check(p, "Read", file_path="a.py") == Decision("allow", "Read is read-only and stays inside the project.")
    assert check(p, "Read", file_path="/etc/hosts") == Decision(
        "ask", "Read of /etc/hosts is outside the project directory; it needs approval.")
    assert p.check("ExitPlanMode", {"plan": "1. do it"}, False) == Decision("allow", "ExitPlanMode needs no permission.")
    assert p.check("TodoWrite", {"todos": []}, False) == Decision("allow", "TodoWrite needs no permission.")


def test_bypass_mode_still_obeys_deny_rules(env):
    p = env({"proj/.agent/settings.json": {"permissions": {
        "deny": ["Bash(rm:*)", "Read(./.env)"], "ask": ["Bash(git push:*)"]}}}, mode="bypassPermissions")
    bypass = Decision("allow", "Bypass mode: allowed without asking.")
    assert check(p, "Bash", command="make && rm -rf x") == Decision("deny", DENY_RM.format("rm -rf x")
                                                                    .replace(".claude", ".agent"), "Bash(rm:*)")
    assert check(p, "Read", file_path=".env") == Decision("deny", "Denied by rule Read(./.env) (.agent/settings.json).",
                                                         "Read(./.env)")
    assert [check(p, "Bash", command="git push"), check(p, "Write", file_path="/etc/x"),
            check(p, "WebFetch", url="https://x.org")] == [bypass, bypass, bypass]
    # deny rules cannot be checked on what we cannot parse
    assert check(p, "Bash", command="cat x | bash") == Decision(
        "ask", "The command could not be parsed with confidence (a shell reads its commands from a pipe or file), "
               "so deny rules cannot be checked; it needs approval.")
    no_bash_deny = Permissions(None, "bypassPermissions", env.root / "proj")
    assert check(no_bash_deny, "Bash", command="cat x | bash") == bypass


def test_dont_ask_mode_denies_what_would_ask(env):
    p = env({}, mode="dontAsk")
    assert check(p, "Bash", command="make") == Decision(
        "deny", "Refused in dontAsk mode (no rule allows it): Bash command needs approval: `make`.")
    assert check(p, "Read", file_path="a.py") == Decision("allow", "Read is read-only and stays inside the project.")


def test_mode_comes_from_settings_and_is_validated(env):
    files = {"proj/.claude/settings.json": {"permissions": {"defaultMode": "plan"}},
             "proj/.agent/settings.local.json": {"permissions": {"defaultMode": "acceptEdits"}}}
    assert env(files, mode=None).mode == "acceptEdits"
    assert env(files, mode="default").mode == "default"
    with pytest.raises(ValueError, match="unknown permission mode 'yolo'; expected one of default, acceptEdits"):
        env({}, mode="yolo")


def test_other_tools(env):
    p = env({"proj/.agent/settings.json": {"permissions": {
        "allow": ["WebFetch(domain:example.com)", "mcp__github", "Skill(release-*)"],
        "deny": ["mcp__db__drop", "Task(general-purpose)"]}}})
    assert check(p, "WebFetch", url="https://docs.example.com/a") == Decision(
        "allow", "Allowed by rule WebFetch(domain:example.com) (.agent/settings.json).", "WebFetch(domain:example.com)")
    assert check(p, "WebFetch", url="https://example.com.evil.org/") == Decision("ask", "WebFetch needs approval.")
    assert p.check("mcp__github__create_issue", {}, False) == Decision(
        "allow", "Allowed by rule mcp__github (.agent/settings.json).", "mcp__github")
    assert p.check("mcp__githubx__y", {}, False) == Decision("ask", "mcp__githubx__y needs approval.")
    assert p.check("mcp__db__drop", {}, False) == Decision(
        "deny", "Denied by rule mcp__db__drop (.agent/settings.json).", "mcp__db__drop")
    assert p.check("Skill", {"skill": "release-notes"}, False).behavior == "allow"
    assert p.check("Task", {"subagent_type": "general-purpose"}, False).behavior == "deny"
    assert p.check("Task", {"subagent_type": "Explore"}, False) == Decision("allow", "Task needs no permission.")


def test_session_rules_and_additional_dirs(env):
    root = env.root
    p = env({}, additional_dirs=[root / "outside"])
    assert check(p, "Read", file_path=str(root / "outside" / "x")) == Decision(
        "allow", "Read is read-only and stays inside the project.")
    p.add_rule("Bash(make:*)")
    assert check(p, "Bash", command="make -j2") == Decision("allow", "Allowed by Bash(make:*).", "Bash(make:*)")


@pytest.mark.parametrize("tool, args, expected", [
    ("Bash", {"command": "npm run test -- -k x"}, ["Bash(npm run test:*)"]),
    ("Bash", {"command": "git status && cargo build --release | tee log"},
     ["Bash(git status:*)", "Bash(cargo build:*)", "Bash(tee log)"]),  # tee writes files: exact
    ("Bash", {"command": "ls && rm -rf build && rm -rf build"}, ["Bash(rm -rf build)"]),  # ls needs no rule
    ("Bash", {"command": "python -m pytest -q"}, ["Bash(python -m pytest -q)"]),
    ("Bash", {"command": "pytest tests/*.py"}, [r"Bash(pytest tests/\*.py)"]),
    ("Bash", {"command": "make $(git rev-parse HEAD)"}, ["Bash(git rev-parse:*)", "Bash(make $(git rev-parse HEAD))"]),
    ("Bash", {"command": "PATH=/x make"}, ["Bash(PATH=/x make)"]),
    ("Bash", {"command": "cat <<EOF\nx\nEOF"}, []),
    ("Edit", {"file_path": "src/pkg/a.py"}, ["Edit(./src/pkg/**)"]),
    ("Write", {"file_path": "README.md"}, ["Edit(./README.md)"]),
    ("Write", {"file_path": ".agent/settings.json"}, ["Edit(./.agent/settings.json)"]),
    ("Read", {"file_path": "/etc/hosts"}, ["Read(//etc/**)"]),
    ("Grep", {"pattern": "x", "path": "/var/log"}, ["Read(//var/log/**)"]),
    ("WebFetch", {"url": "https://docs.python.org/3/"}, ["WebFetch(domain:docs.python.org)"]),
    ("mcp__github__create_issue", {}, ["mcp__github__create_issue"]),
])
def test_suggest_rule(env, tool, args, expected):
    assert env({}).suggest_rule(tool, args) == expected


def test_suggested_rules_allow_exactly_what_was_approved(env):
    command = "git status && cargo build --release | tee log"
    p = env({})
    for rule in p.suggest_rule("Bash", {"command": command}):
        p.add_rule(rule)
    assert check(p, "Bash", command=command).behavior == "allow"
    assert check(p, "Bash", command="cargo build && curl x").behavior == "ask"
    assert check(p, "Bash", command="tee /etc/passwd").behavior == "ask"
    p.add_rule(p.suggest_rule("Edit", {"file_path": "src/pkg/a.py"})[0])
    assert [check(p, "Write", file_path=f).behavior for f in ("src/pkg/b/c.py", "src/other.py")] == ["allow", "ask"]


def test_bash_paths_under_allow_rules(env):
    root = env.root
    (root / "proj" / ".env").write_text("X=1")
    p = env({"proj/.agent/settings.json": {"permissions": {
        "allow": ["Bash(echo:*)", "Bash(ls:*)", "Bash(cat:*)"], "deny": ["Read(./.env)", "Write(./dist/**)"]}}})
    cases = [
        ("echo x > .agent/settings.local.json", Decision(
            "ask", "`echo x > .agent/settings.local.json` writes .agent/settings.local.json, which holds agent "
                   "settings, hooks, skills or git internals; it needs approval.")),
        ("ls > ../x", Decision("ask", f"`ls > ../x` writes {root / 'x'}, outside the project directory; "
                                      "it needs approval.")),
        ("echo x > $OUT", Decision("ask", "`echo x > $OUT` writes to $OUT, which cannot be resolved before it runs; "
                                          "it needs approval.")),
        ("echo x > dist/a.js", Decision("deny", "Denied by rule Write(./dist/**) (.agent/settings.json): "
                                                "`echo x > dist/a.js` writes dist/a.js.", "Write(./dist/**)")),
        ("cat .env", Decision("deny", "Denied by rule Read(./.env) (.agent/settings.json): `cat .env` reads .env.",
                              "Read(./.env)")),
        ("echo .env", Decision("allow", "Allowed by Bash(echo:*).", "Bash(echo:*)")),
        ("echo ok > notes.txt", Decision("allow", "Allowed by Bash(echo:*).", "Bash(echo:*)")),
    ]
    assert [(c, check(p, "Bash", command=c)) for c, _ in cases] == cases
