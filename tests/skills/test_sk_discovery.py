"""Skill discovery over real SKILL.md trees: locations, precedence, warnings, index and rendering."""
from __future__ import annotations

from pathlib import Path

import pytest

from skills.discovery import (BUILTIN_DIR, Skill, discover_skills, render_skill_body, skill_roots,
                              skills_index_text)


@pytest.fixture
def dirs(tmp_path, monkeypatch):
    monkeypatch.delenv("AGENT_HOME", raising=False)
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    project, home = tmp_path / "proj", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    return project, home


def skill(root: Path, name: str, frontmatter: str, body: str = "Do the thing.\n") -> Path:
    path = root / name / "SKILL.md"
    path.parent.mkdir(parents=True)
    path.write_text(f"---\n{frontmatter}---\n{body}")
    return path


def by_name(skills: list[Skill]) -> dict[str, Skill]:
    return {s.name: s for s in skills}


def test_every_location_is_discovered_with_its_source(dirs):
    project, home = dirs
    for root, name in [(project / ".agent/skills", "p-agent"), (project / ".claude/skills", "p-claude"),
                       (project / ".agents/skills", "p-agents"), (home / ".agent/skills", "u-agent"),
                       (home / ".claude/skills", "u-claude"), (home / ".agents/skills", "u-agents")]:
        skill(root, name, f"name: {name}\ndescription: {name} skill\n")
    skills, warnings = discover_skills(project, user_home=home)
    assert warnings == []
    assert {s.name: s.source for s in skills} == {
        "p-agent": "project", "p-claude": "project", "p-agents": "project",
        "u-agent": "user", "u-claude": "user", "u-agents": "user",
        "commit": "builtin", "review": "builtin", "fix-tests": "builtin"}
    assert [s.name for s in skills] == sorted(s.name for s in skills)


def test_agent_home_replaces_the_user_agent_directory(dirs, tmp_path):
    project, home = dirs
    skill(tmp_path / "ah/skills", "from-agent-home", "description: x\n")
    skill(home / ".agent/skills", "from-home", "description: y\n")
    names = {s.name for s in discover_skills(project, user_home=home, agent_home=tmp_path / "ah")[0]}
    assert ("from-agent-home" in names, "from-home" in names) == (True, False)
    names = {s.name for s in discover_skills(project, user_home=home, agent_home=home / ".agent")[0]}
    assert ("from-agent-home" in names, "from-home" in names) == (False, True)


def test_claude_home_replaces_the_user_claude_directory(dirs, tmp_path):
    project, home = dirs
    skill(tmp_path / "cc/skills", "from-config-dir", "description: x\n")
    skill(home / ".claude/skills", "from-home", "description: y\n")
    names = {s.name for s in discover_skills(project, user_home=home, claude_home=tmp_path / "cc")[0]}
    assert ("from-config-dir" in names, "from-home" in names) == (True, False)


def test_project_beats_user_beats_builtin_and_agent_dir_beats_claude_dir(dirs):
    project, home = dirs
    skill(home / ".claude/skills", "commit", "description: user commit\n")
    skill(project / ".claude/skills", "review", "description: claude review\n")
    skill(project / ".agent/skills", "review", "description: agent review\n")
    skill(home / ".agent/skills", "review", "description: user review\n")
    found = by_name(discover_skills(project, user_home=home)[0])
    assert (found["commit"].description, found["commit"].source) == ("user commit", "user")
    assert (found["review"].description, found["review"].path) == (
        "agent review", project / ".agent/skills/review/SKILL.md")
    assert found["fix-tests"].source == "builtin"


def test_fields_are_read(dirs):
    project, home = dirs
    path = skill(project / ".claude/skills", "release-notes",
                 "name: release-notes\ndescription: Draft release notes.\n"
                 "allowed-tools: Bash(git log *) Read\nargument-hint: \"[version]\"\n"
                 "disable-model-invocation: true\nuser-invocable: false\nlicense: MIT\nmodel: small\n"
                 "metadata:\n  owner: docs\n",
                 body="Run `git log`.\nFollow references/style.md.\n")
    s = by_name(discover_skills(project, user_home=home)[0])["release-notes"]
    assert s == Skill(name="release-notes", description="Draft release notes.", path=path, dir=path.parent,
                      body="Run `git log`.\nFollow references/style.md.", source="project",
                      allowed_tools=["Bash(git log *)", "Read"], disable_model_invocation=True,
                      user_invocable=False, argument_hint="[version]", model="small",
                      frontmatter={"name": "release-notes", "description": "Draft release notes.",
                                   "allowed-tools": "Bash(git log *) Read", "argument-hint": "[version]",
                                   "disable-model-invocation": True, "user-invocable": False,
                                   "license": "MIT", "model": "small", "metadata": {"owner": "docs"}})


def test_bad_files_are_warnings_naming_the_file_and_the_rest_still_load(dirs):
    project, home = dirs
    root = project / ".agent/skills"
    broken = skill(root, "broken", "name: broken\ndescription: d\nallowed-tools: [Read\n")
    nodesc = skill(root, "nodesc", "name: nodesc\n")
    renamed = skill(root, "real-dir", "name: other-name\ndescription: mismatched\n")
    upper = skill(root, "Upper_Case", "description: odd name\n")
    skill(root, "good", "description: fine\n")
    (root / "not-a-skill").mkdir()  # a directory without SKILL.md is ignored silently
    (root / "README.md").write_text("notes")
    skills, warnings = discover_skills(project, user_home=home)
    assert warnings == [  # in directory order
        f"{upper}: skill name 'Upper_Case' should be lowercase letters, digits and hyphens",
        f"skill skipped: {broken}: invalid YAML frontmatter at line 4: "
        "expected ',' or ']', but got '<stream end>'",
        f"skill skipped: {nodesc}: no `description` in the frontmatter",
        f"{renamed}: name 'other-name' does not match its directory; using 'real-dir'",
    ]
    assert sorted(by_name(skills)) == ["Upper_Case", "commit", "fix-tests", "good", "real-dir", "review"]


def test_a_broken_project_skill_does_not_hide_the_builtin_of_the_same_name(dirs):
    project, home = dirs
    skill(project / ".agent/skills", "commit", "description: 'unclosed\n")
    skills, warnings = discover_skills(project, user_home=home)
    assert (by_name(skills)["commit"].source, len(warnings)) == ("builtin", 1)


def test_unquoted_colon_in_description_still_loads(dirs):
    project, home = dirs
    skill(project / ".claude/skills", "pdf", "name: pdf\ndescription: Fill PDF forms. Use when: the user has a PDF\n")
    skills, warnings = discover_skills(project, user_home=home)
    assert (by_name(skills)["pdf"].description, warnings) == ("Fill PDF forms. Use when: the user has a PDF", [])


def test_running_in_the_home_directory_does_not_duplicate_roots(dirs):
    _, home = dirs
    roots = skill_roots(home, user_home=home)
    assert roots == [(home / ".agent/skills", "project"), (home / ".claude/skills", "project"),
                     (home / ".agents/skills", "project"), (BUILTIN_DIR, "builtin")]


def test_index_text_lists_model_invocable_skills_sorted_and_compact(dirs):
    project, home = dirs
    skill(project / ".agent/skills", "zeta", "description: Last one.\n")
    skill(project / ".agent/skills", "alpha", "description: >\n  Folded\n  over lines.\n")
    skill(project / ".agent/skills", "hidden", "description: User only.\ndisable-model-invocation: true\n")
    skill(project / ".agent/skills", "long", f"description: {'x' * 400}\n")
    skills = [s for s in discover_skills(project, user_home=home)[0] if s.source == "project"]
    assert skills_index_text(skills) == ("- alpha: Folded over lines.\n"
                                         f"- long: {'x' * 299}…\n"
                                         "- zeta: Last one.")
    assert skills_index_text([]) == ""


def test_builtin_skills_are_in_the_index(monkeypatch):
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    skills, warnings = discover_skills(Path("/nonexistent"), user_home=Path("/nonexistent"),
                                       agent_home=Path("/nonexistent"))
    assert warnings == []
    index = skills_index_text(skills).splitlines()
    assert [line.split(":")[0] for line in index] == ["- commit", "- fix-tests", "- review"]
    assert all(len(s.body) > 500 and s.user_invocable and not s.disable_model_invocation for s in skills)


def test_render_substitutes_arguments_or_appends_them(dirs):
    project, home = dirs
    skill(project / ".agent/skills", "fix-issue", "description: Fix an issue.\n",
          body="Fix issue $ARGUMENTS following our standards.\nFirst word: $ARGUMENTS[0]. Keep `awk '{print $1}'`.\n")
    skill(project / ".agent/skills", "plain", "description: Plain.\n", body="Read references/style.md.\n")
    found = by_name(discover_skills(project, user_home=home)[0])
    d = project / ".agent/skills"
    assert render_skill_body(found["fix-issue"], '123 "high prio"') == (
        f"Base directory for this skill: {d / 'fix-issue'}\n\n"
        "Fix issue 123 \"high prio\" following our standards.\nFirst word: 123. Keep `awk '{print $1}'`.\n")
    assert render_skill_body(found["plain"], "in French") == (
        f"Base directory for this skill: {d / 'plain'}\n\nRead references/style.md.\n\nARGUMENTS: in French\n")
    assert render_skill_body(found["plain"], "") == (
        f"Base directory for this skill: {d / 'plain'}\n\nRead references/style.md.\n")
    assert render_skill_body(found["fix-issue"], "") == (
        f"Base directory for this skill: {d / 'fix-issue'}\n\n"
        "Fix issue  following our standards.\nFirst word: . Keep `awk '{print $1}'`.\n")
    builtin = by_name(discover_skills(project, user_home=home)[0])["commit"]
    assert builtin.source == "builtin" and not render_skill_body(builtin, "").startswith("Base directory")


def test_builtin_skills_ship_as_package_data():
    text = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    assert 'skills = ["**/*.md"]' in text
    assert sorted(p.parent.name for p in BUILTIN_DIR.glob("*/SKILL.md")) == ["commit", "fix-tests", "review"]
