"""Custom slash commands from real .md trees: discovery, namespaces, precedence and $ARGUMENTS/$N."""
from __future__ import annotations

from pathlib import Path

import pytest

from skills.commands import Command, discover_commands, find_command, render


@pytest.fixture
def dirs(tmp_path, monkeypatch):
    monkeypatch.delenv("AGENT_HOME", raising=False)
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    project, home = tmp_path / "proj", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    return project, home


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_discovery_namespaces_and_precedence(dirs):
    project, home = dirs
    write(project / ".claude/commands/review.md", "Review the diff.\n")
    write(project / ".agent/commands/review.md", "---\ndescription: Our review\n---\nReview carefully.\n")
    write(project / ".claude/commands/frontend/component.md", "Create a component named $1.\n")
    write(project / ".claude/commands/a/b/deep.md", "Deep.\n")
    write(home / ".claude/commands/review.md", "User review.\n")
    write(home / ".claude/commands/standup.md", "# Write my standup\n\nSummarize yesterday's commits.\n")
    write(home / ".agent/commands/notes.txt", "not a command")
    commands, warnings = discover_commands(project, user_home=home)
    assert warnings == []
    assert [(c.name, c.source, c.description) for c in commands] == [
        ("a:b:deep", "project", "Deep."),
        ("frontend:component", "project", "Create a component named $1."),
        ("review", "project", "Our review"),
        ("standup", "user", "Write my standup"),
    ]
    assert find_command(commands, "/review").path == project / ".agent/commands/review.md"
    assert find_command(commands, "nope") is None


def test_frontmatter_fields(dirs):
    project, home = dirs
    path = write(project / ".agent/commands/fix-issue.md",
                 "---\ndescription: Fix a GitHub issue\nargument-hint: [issue-number] [priority]\n"
                 "allowed-tools: Bash(gh issue view:*), Read\nmodel: small\n---\nFix issue #$1 with priority $2.\n")
    [cmd], warnings = discover_commands(project, user_home=home)
    assert (cmd, warnings) == (Command(
        name="fix-issue", description="Fix a GitHub issue", body="Fix issue #$1 with priority $2.", path=path,
        source="project", argument_hint="[issue-number] [priority]",
        allowed_tools=["Bash(gh issue view:*)", "Read"], model="small",
        frontmatter={"description": "Fix a GitHub issue", "argument-hint": "[issue-number] [priority]",
                     "allowed-tools": "Bash(gh issue view:*), Read", "model": "small"}), [])


def test_bad_files_are_warnings_and_the_rest_load(dirs):
    project, home = dirs
    bad = write(project / ".agent/commands/bad.md", "---\ndescription: \"oops\n---\nBody\n")
    empty = write(project / ".agent/commands/empty.md", "---\ndescription: nothing\n---\n\n")
    spaced = write(project / ".agent/commands/two words.md", "Body\n")
    write(project / ".agent/commands/ok.md", "Fine.\n")
    commands, warnings = discover_commands(project, user_home=home)
    assert [c.name for c in commands] == ["ok"]
    assert warnings == [
        f"command skipped: {bad}: invalid YAML frontmatter at line 2: found unexpected end of stream",
        f"command skipped: {empty}: the prompt (body) is empty",
        f"command skipped: {spaced}: a command name cannot contain spaces",
    ]


def test_argument_hint_written_as_a_yaml_list_reads_back_as_written(dirs):
    project, home = dirs
    write(project / ".agent/commands/commit.md", "---\nargument-hint: [message]\n---\nCommit.\n")
    assert discover_commands(project, user_home=home)[0][0].argument_hint == "[message]"


def cmd(body: str) -> Command:
    return Command(name="t", description="t", body=body, path=Path("t.md"), source="project")


@pytest.mark.parametrize("body,args,expected", [
    ("Fix issue #$1 with priority $2. All: $ARGUMENTS", '123 "very high"',
     'Fix issue #123 with priority very high. All: 123 "very high"'),
    ("Only $1 and $2 and $3.", "one", "Only one and  and ."),
    ("$1$2 then $10", "a b", "ab then $10"),
    ("Word $ARGUMENTS[1].", "a b c", "Word b."),
    ("Run the linter.", "--fix src/", "Run the linter.\n\nARGUMENTS: --fix src/"),
    ("Run the linter.", "  ", "Run the linter."),
    ("Echo $1|$2", "it's unbalanced", "Echo it's|unbalanced"),  # bad quoting falls back to words
    ("Keep $HOME and $ARGUMENTSX", "x", "Keep $HOME and $ARGUMENTSX\n\nARGUMENTS: x"),
    ("Literal $1 text", "$ARGUMENTS $2", "Literal $ARGUMENTS text"),  # no re-substitution of inserted text
])
def test_render(body, args, expected):
    assert render(cmd(body), args) == expected
