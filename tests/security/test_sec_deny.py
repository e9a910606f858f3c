"""Class 3: a deny rule holds through every shell form: nested shells, stdin-fed shells, wrappers,
find -exec, xargs, a dynamic command word; git's global options do not hide a denied subcommand."""
import subprocess

import pytest

from sec_support import attack, bash

RM_FORMS = [
    "rm a.txt",
    "sh -lc 'rm a.txt'",
    "bash -ec 'rm a.txt'",
    "bash -c \"ls; rm a.txt\"",
    "echo 'rm a.txt' | bash",
    "printf 'rm a.txt\\n' | sh",
    "bash <<< 'rm a.txt'",
    "sh -s <<< 'rm a.txt'",
    "cat <<EOF | sh\nrm a.txt\nEOF",
    "bash <<'EOF'\nrm a.txt\nEOF",
    "x=rm; $x a.txt",
    "$(echo rm) a.txt",
    "`echo rm` a.txt",
    "${CMD:-rm} a.txt",
    "find . -name a.txt -exec rm {} +",
    "find . -name a.txt -execdir rm {} \\;",
    "setsid rm a.txt",
    "nice -n 5 rm a.txt",
    "timeout 5 rm a.txt",
    "env -i rm a.txt",
    "env FOO=1 rm a.txt",
    "nohup rm a.txt",
    "command rm a.txt",
    "/bin/rm a.txt",
    "\\rm a.txt",
    "'r'm a.txt",
    "echo a.txt | xargs rm",
    "xargs -a /dev/stdin rm <<< a.txt",
    "eval 'rm a.txt'",
    "eval rm a.txt",
    "bash -c 'sh -c \"rm a.txt\"'",
    "stdbuf -o0 rm a.txt",
    "cat a.txt | bash",  # a shell reading a pipe we cannot read asks
    "ls && (cd src && rm ../a.txt)",
    "f() { rm a.txt; }; f",
]


@pytest.mark.parametrize("command", RM_FORMS)
def test_denied_rm_never_deletes(world, sandbox, command):
    out = attack(world, [bash(command)], sandbox=sandbox, settings={"permissions": {"deny": ["Bash(rm:*)"]}})
    assert (world.proj / "a.txt").read_text() == "alpha\n"
    assert (out.changed, out.strays) == (set(), [])
    assert "permission to use Bash was denied" in out.results[0]


@pytest.mark.parametrize("command", ["sh -lc 'rm a.txt'", "echo 'rm a.txt' | bash", "find . -name a.txt -exec rm {} +",
                                     "x=rm; $x a.txt"])
def test_denied_rm_holds_in_bypass_mode(world, sandbox, command):
    out = attack(world, [bash(command)], sandbox=sandbox, mode="bypassPermissions",
                 settings={"permissions": {"deny": ["Bash(rm:*)"]}})
    assert (out.changed, out.strays) == (set(), [])


def _remote_heads(world) -> str:
    return subprocess.run(["git", "for-each-ref"], cwd=world.remote, capture_output=True, text=True).stdout


@pytest.mark.parametrize("command", ["git push origin HEAD", "git -C . push origin HEAD",
                                     "git --no-pager push origin HEAD", "git -c core.pager=cat push origin HEAD",
                                     "git --git-dir=.git push origin HEAD", "cd src && git -C .. push origin HEAD"])
def test_denied_git_push_never_pushes(world, sandbox, command):
    out = attack(world, [bash(command)], sandbox=sandbox, allowed=("Bash(git:*)", "Bash(cd:*)"),
                 settings={"permissions": {"deny": ["Bash(git push:*)"]}})
    assert _remote_heads(world) == ""
    assert (out.changed, out.strays) == (set(), [])


def test_allowed_git_push_does_push(world):
    """The control: the same push with the rule allowing it reaches the remote."""
    out = attack(world, [bash("git -C . push -q origin HEAD:refs/heads/main")], allowed=("Bash(git:*)",))
    assert "refs/heads/main" in _remote_heads(world), out.text


@pytest.mark.parametrize("command", ["sh -lc 'rm a.txt'", "echo 'rm a.txt' | bash", "find . -name a.txt -exec rm {} +",
                                     "setsid rm a.txt"])
def test_without_the_deny_rule_the_same_forms_do_delete(world, sandbox, command):
    """The control: what the deny rule stops is a real deletion."""
    out = attack(world, [bash(command)], sandbox=sandbox, mode="bypassPermissions")
    assert (out.changed, out.strays) == ({"proj/a.txt"}, [])
