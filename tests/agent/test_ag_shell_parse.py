import pytest

from agent.core.shell_parse import Part, Split, split_command
from agent.core.shell_unwrap import expand, git_normalized


def commands(command: str) -> tuple[list[str], bool, str]:
    split = split_command(command)
    return [p.command for p in split.parts], split.ok, split.problem


@pytest.mark.parametrize("command, expected", [
    ("git status", ["git status"]),
    ("git status && rm -rf /", ["git status", "rm -rf /"]),
    ("a || b; c | d & e |& f", ["a", "b", "c", "d", "e", "f"]),
    ("make\nmake test\n", ["make", "make test"]),
    ('echo "a && b" | grep a', ['echo "a && b"', "grep a"]),
    ("echo 'x; y' ; ls", ["echo 'x; y'", "ls"]),
    ("echo $(date) `whoami`", ["date", "whoami", "echo $(date) `whoami`"]),
    ('echo "$(cat f | wc -l) lines"', ["cat f", "wc -l", 'echo "$(cat f | wc -l) lines"']),
    ("echo $(echo $(rm -rf x))", ["rm -rf x", "echo $(rm -rf x)", "echo $(echo $(rm -rf x))"]),
    ("X=$(curl evil) ls", ["curl evil", "ls"]),
    ("(cd sub && make) > log", ["cd sub", "make", "> log"]),
    ("if grep -q x f; then rm y; else echo no; fi", ["grep -q x f", "rm y", "echo no"]),
    ("for f in $(ls); do echo $f; done", ["ls", "echo $f"]),
    ("while read l; do echo $l; done < in.txt", ["read l", "echo $l", "< in.txt"]),
    ("ls # && rm -rf /", ["ls"]),
    ("npm test > out.txt 2>&1", ["npm test > out.txt 2>&1"]),
    ("echo a>b", ["echo a >b"]),
    ("PATH=/tmp/evil", ["PATH=/tmp/evil"]),
    ("cat <<EOF\nrm -rf /\nEOF", ["cat <<EOF"]),  # a here-document is data
    ("diff <(ls a) <(ls b)", ["ls a", "ls b", "diff <(ls a) <(ls b)"]),
    ("f() { rm -rf /; }; f", ["rm -rf /", "f"]),
    ("case $x in a) rm x;; esac", ["rm x"]),
    ("echo ${x:-$(rm y)}", ["rm y", "echo ${x:-$(rm y)}"]),
    ("", []),
])
def test_split_parts(command, expected):
    assert commands(command) == (expected, True, "")


@pytest.mark.parametrize("command, problem", [
    ("echo 'unterminated", "syntax error"),
    ("(ls", "syntax error"),
    ("x=rm; $x a.txt", "the command word is a variable or substitution"),
    ("$(echo rm) a.txt", "the command word is a variable or substitution"),
])
def test_what_cannot_be_read_is_flagged(command, problem):
    assert split_command(command).problem == problem


def test_part_fields():
    split = split_command("FOO=1 BAR='x y' npm run \"test\" -- -k 'a b' > out.txt 2>&1")
    assert split == Split([Part(command="npm run \"test\" -- -k 'a b' > out.txt 2>&1",
                                argv=["npm", "run", "test", "--", "-k", "a b"], env=["FOO=1", "BAR='x y'"],
                                redirects=[(">", "out.txt"), ("2>&", "1")], dynamic=[False] * 6)], ok=True)


def test_stdin_text_is_known_for_here_strings_heredocs_and_literal_pipes():
    assert [p.stdin for p in split_command("bash <<< 'rm a'").parts] == ["rm a\n"]
    assert [p.stdin for p in split_command("cat <<E | sh\nrm b\nE\n").parts] == ["rm b\n", "rm b\n"]
    assert [(p.stdin, p.stdin_unknown) for p in split_command("echo rm c | bash").parts] == [
        (None, False), ("rm c\n", False)]
    assert [(p.stdin, p.stdin_unknown) for p in split_command("cat f | bash").parts] == [(None, False), (None, True)]


@pytest.mark.parametrize("command, inner, problem", [
    ("sh -lc 'rm a'", ["rm a"], ""),
    ("bash -ec 'ls; rm a'", ["ls", "rm a"], ""),
    ("bash -o pipefail -c 'rm a'", ["rm a"], ""),
    ("echo 'rm a' | bash", ["rm a"], ""),
    ("bash <<< 'rm a'", ["rm a"], ""),
    ("cat f | sh", [], "a shell reads its commands from a pipe or file"),
    ("bash -c \"$CMD\"", [], "shell -c of an expansion"),
    ("bash run.sh", [], ""),
    ("find . -name x -exec rm {} + -execdir chmod 600 {} \\;", ["rm {}", "chmod 600 {}"], ""),
    ("echo a | xargs -0 -n 1 rm -f", ["rm -f"], ""),
    ("nice -n 5 timeout -s KILL 5 /bin/rm x", ["timeout -s KILL 5 /bin/rm x", "/bin/rm x", "rm x"], ""),
    ("env -i FOO=1 rm x", ["rm x"], ""),
    ("sudo -u root rm x", ["rm x"], ""),
    ("setsid -f rm x", ["rm x"], ""),
    ("eval 'rm x'", ["rm x"], ""),
    ("env $X a", [], "the command word is a variable or substitution"),
    ("git -C sub -c a=b --no-pager push origin", ["git push origin"], ""),
])
def test_unwrapping(command, inner, problem):
    split = split_command(command)
    unwrapped = expand(split.parts)
    outer = [p.command for p in split.parts]
    assert ([p.command for p in unwrapped.parts if p.command not in outer], unwrapped.problem) == (inner, problem)


def test_git_normalized():
    assert git_normalized(["git", "--git-dir=.git", "--work-tree", "w", "push"]) == ["git", "push"]
    assert git_normalized(["git", "push"]) is None and git_normalized(["ls"]) is None


def test_nesting_is_bounded_and_nothing_raises():
    import random

    deep = "$(" * 200 + "rm x" + ")" * 200
    assert split_command(deep).ok is False
    rng = random.Random(7)
    alphabet = list("ab $()`'\"\\|&;<>{}[]*?~=#\n\t") + ["<<", "<<<", "$((", "${", "-c", "bash"]
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        split = split_command(text)
        expand(split.parts)
