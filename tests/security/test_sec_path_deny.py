"""Class 4: Read and Edit deny rules hold for every tool: Bash reads and writes, Grep results."""
import pytest

from sec_support import ENV_SECRET, attack, bash, call

READ_DENY = {"permissions": {"deny": ["Read(./.env)", "Read(./secrets/**)"]}}
EDIT_DENY = {"permissions": {"deny": ["Edit(./secrets/**)", "Edit(./src/app.py)"]}}


@pytest.mark.parametrize("command", [
    "cat .env",
    "head -n 5 .env",
    "grep TOKEN .env",
    "cat < .env",
    "cat ./.env",
    "cat src/../.env",
    "cat .e?v",
    "sh -c 'cat .env'",
    "echo 'cat .env' | bash",
    "cat secrets/db.txt",
    "cat secrets/*",
    "grep -r TOKEN secrets",
    "awk 1 .env",
    "cp .env leaked.txt && cat leaked.txt",
])
def test_read_denied_files_never_print(world, sandbox, command):
    out = attack(world, [bash(command)], sandbox=sandbox, allowed=("Bash",), settings=READ_DENY)
    assert ENV_SECRET not in out.text and "hunter2" not in out.text
    assert (out.changed, out.strays) == (set(), [])


def test_grep_over_the_project_leaves_denied_files_out(world, sandbox):
    out = attack(world, [call("Grep", pattern="TOKEN|hunter2|alpha", output_mode="content")], sandbox=sandbox,
                 settings=READ_DENY)
    assert "hunter2" not in out.text and ENV_SECRET not in out.text
    assert "a.txt:1:alpha" in out.text
    assert (out.changed, out.strays) == (set(), [])


def test_recursive_bash_grep_over_denied_paths_asks(world, sandbox):
    out = attack(world, [bash("grep -rn TOKEN .")], sandbox=sandbox, settings=READ_DENY)
    assert "hunter2" not in out.text
    assert (out.changed, out.strays) == (set(), [])


@pytest.mark.parametrize("command", [
    "echo x > secrets/new",
    "echo x >> secrets/db.txt",
    "tee secrets/new < a.txt",
    "cp a.txt secrets/",
    "cp a.txt secrets/copy",
    "touch secrets/new",
    "rm secrets/db.txt",
    "sed -i s/hunter2/x/ secrets/db.txt",
    "mv a.txt secrets/a.txt",
    "echo 'print(1)' > src/app.py",
    "sh -c 'echo x > secrets/new'",
    "cd secrets && echo x > new",
])
def test_edit_denied_paths_are_never_written(world, sandbox, command):
    out = attack(world, [bash(command)], sandbox=sandbox, allowed=("Bash",), settings=EDIT_DENY)
    assert (out.changed, out.strays) == (set(), [])
    assert "Denied by rule Edit(" in out.results[0]


def test_edit_deny_leaves_other_writes_alone(world, sandbox):
    out = attack(world, [bash("echo x > src/other.py")], sandbox=sandbox, allowed=("Bash",), settings=EDIT_DENY)
    assert (out.changed, out.strays) == ({"proj/src/other.py"}, [])


@pytest.mark.parametrize("tool, args", [("Write", {"file_path": "secrets/new", "content": "x"}),
                                        ("Read", {"file_path": ".env"}), ("Read", {"file_path": "secrets/db.txt"})])
def test_the_file_tools_obey_the_same_rules(world, sandbox, tool, args):
    out = attack(world, [call(tool, **args)], sandbox=sandbox, mode="acceptEdits",
                 settings={"permissions": {"deny": READ_DENY["permissions"]["deny"] + EDIT_DENY["permissions"]["deny"]}})
    assert ENV_SECRET not in out.text and "hunter2" not in out.text
    assert (out.changed, out.strays) == (set(), [])
