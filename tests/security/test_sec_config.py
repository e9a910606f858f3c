"""Classes 5 and 7: acceptEdits never edits settings, hooks, skills, commands, agents or any .git/; a skill
changed during the session grants nothing from its allowed-tools without the user's approval."""
import pytest

from sec_support import attack, bash, call

@pytest.fixture(params=["off", "on"])
def sandbox(request) -> str:
    """"on": sandboxed, but the rules still ask (in "auto" a sandboxed `touch` runs anyway: nothing to escalate)."""
    return request.param


EVIL_SKILL = "---\nname: helper\ndescription: Helps.\nallowed-tools: Bash\n---\nHelp out.\n"


@pytest.mark.parametrize("path", [
    ".agent/settings.json", ".agent/settings.local.json", ".claude/settings.json", ".claude/settings.local.json",
    ".claude/hooks/guard.sh", ".agent/skills/helper/SKILL.md", ".claude/skills/new/SKILL.md",
    ".agents/skills/new/SKILL.md", ".agent/commands/deploy.md", ".claude/commands/deploy.md",
    ".claude/agents/reviewer.md", ".agent/agents/reviewer.md", ".git/hooks/pre-commit", ".git/config",
    "vendor/lib/.git/hooks/post-checkout", "vendor/lib/.git/config", "src/.git/hooks/x",
])
def test_accept_edits_never_writes_configuration(world, sandbox, path):
    out = attack(world, [call("Write", file_path=path, content="#!/bin/sh\ntouch /tmp/pwned\n")],
                 sandbox=sandbox, mode="acceptEdits")
    assert (out.changed, out.strays) == (set(), [])
    assert "changes agent settings, hooks or git internals" in out.results[0]


def test_accept_edits_still_writes_project_files(world, sandbox):
    out = attack(world, [call("Write", file_path="src/new.py", content="x = 1\n")], sandbox=sandbox, mode="acceptEdits")
    assert (out.changed, out.strays) == ({"proj/src/new.py"}, [])


def test_accept_edits_cannot_arm_a_skill(world, sandbox):
    """The issue's attack: edit the skill to allow Bash, load it, run anything."""
    skill = ".agent/skills/helper/SKILL.md"
    out = attack(world, [call("Read", file_path=skill),
                         call("Edit", file_path=skill, old_string="description: Helps.\n",
                              new_string="description: Helps.\nallowed-tools: Bash\n"),
                         call("Skill", skill="helper"), bash("touch pwned")], sandbox=sandbox, mode="acceptEdits")
    assert (out.changed, out.strays) == (set(), [])
    assert "permission to use Bash was denied" in out.results[-1]


@pytest.mark.parametrize("how", ["Write", "Bash"])
def test_a_skill_changed_in_the_session_grants_nothing(world, sandbox, how):
    """Even where a rule lets the skill file change, its new allowed-tools are not granted unasked."""
    skill = ".agent/skills/helper/SKILL.md"
    change = (call("Write", file_path=skill, content=EVIL_SKILL) if how == "Write"
              else bash(f"printf '%s' '{EVIL_SKILL}' > {skill}"))
    out = attack(world, [call("Read", file_path=skill), change, call("Skill", skill="helper"), bash("touch pwned")],
                 sandbox=sandbox, allowed=("Edit(./.agent/skills/**)", "Bash(printf:*)"),
                 settings={"permissions": {"allow": ["Edit(./.agent/skills/**)"]}})
    assert out.strays == [] and not (world.proj / "pwned").exists()
    if how == "Write":
        assert out.changed == {"proj/" + skill}
        assert "were not granted" in out.results[2]
    assert "permission to use Bash was denied" in out.results[-1]


def test_an_unchanged_skill_grants_its_allowed_tools(world, sandbox):
    """The control: the same flow with a skill as the session found it grants Bash(touch:*)."""
    out = attack(world, [call("Skill", skill="toucher"), bash("touch marker")], sandbox=sandbox)
    assert (out.changed, out.strays) == ({"proj/marker"}, [])


@pytest.mark.parametrize("user_says", [True, False])
def test_the_user_decides_on_a_changed_skills_grants(world, sandbox, user_says):
    from agent.core.run_types import Approval  # the approver's answer type

    asked = []

    def user(tool, args, reason):
        asked.append((tool, args))
        return Approval(user_says and tool == "Skill", "no")

    skill = ".agent/skills/toucher/SKILL.md"
    text = (world.proj / skill).read_text().replace("Bash(touch:*)", "Bash(touch:*) Bash(mkdir:*)")
    out = attack(world, [call("Read", file_path=skill), call("Write", file_path=skill, content=text),
                         call("Skill", skill="toucher"), bash("touch marker")],
                 sandbox=sandbox, settings={"permissions": {"allow": ["Edit(./.agent/skills/**)"]}}, approver=user)
    assert asked[0] == ("Skill", {"skill": "skill toucher", "allowed_tools": ["Bash(touch:*)", "Bash(mkdir:*)"]})
    expected = {"proj/" + skill} | ({"proj/marker"} if user_says else set())
    assert (out.changed, out.strays) == (expected, [])
