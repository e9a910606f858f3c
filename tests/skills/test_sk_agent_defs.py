"""Subagent definitions from real .md files, tool lists, precedence and the built-ins."""
from __future__ import annotations

from pathlib import Path

import pytest

from skills.agent_defs import AgentDef, agents_index_text, discover_agents, find_agent


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


def test_builtins_alone(dirs):
    project, home = dirs
    agents, warnings = discover_agents(project, user_home=home)
    assert warnings == []
    assert [(a.name, a.tools, a.model, a.source) for a in agents] == [
        ("general-purpose", None, "inherit", "builtin"),
        ("Explore", ["Read", "Grep", "Glob", "LS"], "inherit", "builtin"),
        ("Plan", ["Read", "Grep", "Glob", "LS"], "inherit", "builtin"),
    ]
    assert "concise" in find_agent(agents, "Explore").system_prompt
    assert "numbered list" in find_agent(agents, "Plan").system_prompt


def test_definitions_with_tool_lists(dirs):
    project, home = dirs
    reviewer = write(project / ".claude/agents/code-reviewer.md",
                     "---\nname: code-reviewer\ndescription: Reviews code changes. Use after edits.\n"
                     "tools: Read, Grep, Glob, Bash\nmodel: inherit\ncolor: blue\n---\n"
                     "You are a careful code reviewer.\nRun git diff.\n")
    write(project / ".agent/agents/tester.md",
          "---\nname: tester\ndescription: Runs tests\ntools:\n  - Bash(pytest:*)\n  - Read\nmodel: small\n---\nTest.\n")
    write(project / ".agent/agents/all.md", "---\nname: all\ndescription: Everything\ntools: \"*\"\n---\nAll.\n")
    write(project / ".agent/agents/none.md", "---\nname: none\ndescription: No tools\ntools: []\n---\nThink.\n")
    write(project / ".agent/agents/spaces.md", "---\nname: spaces\ndescription: d\ntools: Read Grep\n---\nS.\n")
    agents, warnings = discover_agents(project, user_home=home)
    assert warnings == []
    found = {a.name: a for a in agents}
    assert found["code-reviewer"] == AgentDef(
        name="code-reviewer", description="Reviews code changes. Use after edits.",
        system_prompt="You are a careful code reviewer.\nRun git diff.", tools=["Read", "Grep", "Glob", "Bash"],
        model="inherit", source="project", path=reviewer,
        frontmatter={"name": "code-reviewer", "description": "Reviews code changes. Use after edits.",
                     "tools": "Read, Grep, Glob, Bash", "model": "inherit", "color": "blue"})
    assert [(n, found[n].tools, found[n].model) for n in ("tester", "all", "none", "spaces")] == [
        ("tester", ["Bash(pytest:*)", "Read"], "small"), ("all", None, "inherit"), ("none", [], "inherit"),
        ("spaces", ["Read", "Grep"], "inherit")]
    assert [a.name for a in agents] == ["general-purpose", "Explore", "Plan",
                                        "all", "code-reviewer", "none", "spaces", "tester"]


def test_project_overrides_user_overrides_builtin(dirs):
    project, home = dirs
    write(home / ".claude/agents/explore.md", "---\nname: Explore\ndescription: user explore\n---\nU.\n")
    write(home / ".agent/agents/helper.md", "---\nname: helper\ndescription: user helper\n---\nU.\n")
    write(project / ".claude/agents/helper.md", "---\nname: helper\ndescription: claude helper\n---\nC.\n")
    write(project / ".agent/agents/helper.md", "---\nname: helper\ndescription: project helper\n---\nP.\n")
    found = {a.name: a for a in discover_agents(project, user_home=home)[0]}
    assert (found["Explore"].description, found["Explore"].source, found["Explore"].tools) == (
        "user explore", "user", None)
    assert (found["helper"].description, found["helper"].path) == (
        "project helper", project / ".agent/agents/helper.md")
    assert found["Plan"].source == "builtin"


def test_bad_files_are_warnings(dirs):
    project, home = dirs
    root = project / ".agent/agents"
    bad = write(root / "bad.md", "---\nname: bad\ndescription: x\ntools: [Read\n---\nB.\n")
    nodesc = write(root / "nodesc.md", "---\nname: nodesc\n---\nN.\n")
    empty = write(root / "empty.md", "---\nname: empty\ndescription: d\n---\n")
    spaced = write(root / "spaced.md", "---\nname: two words\ndescription: d\n---\nS.\n")
    write(root / "nameless.md", "---\ndescription: named after the file\n---\nOK.\n")
    agents, warnings = discover_agents(project, user_home=home)
    assert warnings == [
        f"agent skipped: {bad}: invalid YAML frontmatter at line 4: expected ',' or ']', but got '<stream end>'",
        f"agent skipped: {empty}: the system prompt (body) is empty",
        f"agent skipped: {nodesc}: no `description` in the frontmatter",
        f"agent skipped: {spaced}: name 'two words' cannot contain spaces",
    ]
    assert [a.name for a in agents] == ["general-purpose", "Explore", "Plan", "nameless"]


def test_index_text(dirs):
    project, home = dirs
    write(project / ".agent/agents/x.md", "---\nname: x\ndescription: >\n  Two\n  lines.\n---\nX.\n")
    text = agents_index_text(discover_agents(project, user_home=home)[0])
    assert [line.split(":")[0] for line in text.splitlines()] == ["- general-purpose", "- Explore", "- Plan", "- x"]
    assert text.endswith("\n- x: Two lines.")
