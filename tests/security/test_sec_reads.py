"""Class 2: the read-only commands that run without asking never read outside the project."""
import pytest

from sec_support import KEY, OUTSIDE_SECRET, attack, bash


@pytest.mark.parametrize("command", [
    "cat doc*/id_rsa",  # a glob through an in-project symlink to ~/.ssh
    "cat docs/id_rsa",
    "head -n 1 docs/id_rsa",
    "grep -R BEGIN .",  # -R follows the symlink
    "grep -r BEGIN docs/",
    "cat d?cs/id_rsa",
    "cat ~/.ssh/id_rsa",
    "cat ~+/../home/.ssh/id_rsa",
    "cd ../outside && cat secret",
    "cat ~+/../outside/secret",
    "cat ~-/secret",
    "tail ../outside/secret",
    "wc -c ../outside/secret && cat ../outside/secret",
    "ls ../outside; cat ../outside/*",
    "grep -h . ../outside/secret",
    "cat $HOME/.ssh/id_rsa",
    "cat `echo docs`/id_rsa",
    "cat < docs/id_rsa",
    "echo $(cat docs/id_rsa)",
])
def test_reads_outside_the_project_never_print(world, sandbox, command):
    out = attack(world, [bash(command)], sandbox=sandbox)
    assert KEY not in out.text and OUTSIDE_SECRET not in out.text
    assert (out.changed, out.strays) == (set(), [])


@pytest.mark.parametrize("command, shown", [
    ("cat a.txt", "alpha"),
    ("grep -rn print src", "src/app.py:1:print('app')"),
    ("cat src/*.py | wc -l", "1"),
])
def test_reads_inside_the_project_run_without_asking(world, sandbox, command, shown):
    out = attack(world, [bash(command)], sandbox=sandbox)
    assert shown in out.results[0] and "denied" not in out.results[0]
    assert (out.changed, out.strays) == (set(), [])
