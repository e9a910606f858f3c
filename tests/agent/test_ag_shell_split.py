import random

import pytest

from agent.core.shell_split import Part, Split, split_command


def commands(command: str) -> tuple[list[str], bool, str]:
    split = split_command(command)
    return [p.command for p in split.parts], split.ok, split.problem


@pytest.mark.parametrize("command, expected", [
    ("git status", ["git status"]),
    ("git status && rm -rf /", ["git status", "rm -rf /"]),
    ("a || b; c | d & e |& f", ["a", "b", "c", "d", "e", "f"]),
    ("make\nmake test\n", ["make", "make test"]),
    ("  git    diff   HEAD  ", ["git diff HEAD"]),
    # separators inside quotes and escapes do not split
    ('echo "a && b" | grep a', ['echo "a && b"', "grep a"]),
    ("echo 'x; y' ; ls", ["echo 'x; y'", "ls"]),
    (r"echo a\;b\&\&c", [r"echo a\;b\&\&c"]),
    ('git commit -m "fix: a; b" \\\n  --amend', ['git commit -m "fix: a; b" --amend']),
    # substitutions: inner commands are parts and come first (they run first)
    ("echo $(date) `whoami`", ["date", "whoami", "echo $(date) `whoami`"]),
    ('echo "$(cat f | wc -l) lines"', ["cat f", "wc -l", 'echo "$(cat f | wc -l) lines"']),
    ('echo "$(echo ")")"', ['echo ")"', 'echo "$(echo ")")"']),
    ("echo $(echo $(rm -rf x))", ["rm -rf x", "echo $(rm -rf x)", "echo $(echo $(rm -rf x))"]),
    ("X=$(curl evil) ls", ["curl evil", "ls"]),
    # subshells and groups
    ("(cd sub && make) > log", ["cd sub", "make", "> log"]),
    ("{ a; b; } 2>/dev/null", ["a", "b", "2>/dev/null"]),
    # control flow: keywords are not commands
    ("if grep -q x f; then rm y; else echo no; fi", ["grep -q x f", "rm y", "echo no"]),
    ("for f in $(ls); do echo $f; done", ["ls", "echo $f"]),
    ("while read l; do echo $l; done < in.txt", ["read l", "echo $l", "< in.txt"]),
    ("! grep -q x f", ["grep -q x f"]),
    # comments, redirections, env assignments
    ("ls # && rm -rf /", ["ls"]),
    ("npm test > out.txt 2>&1", ["npm test > out.txt 2>&1"]),
    ("echo a>b", ["echo a >b"]),
    ("cat < in.txt &> /dev/null", ["cat < in.txt &> /dev/null"]),
    ("FOO=1 BAR='x y' npm test", ["npm test"]),
    ("PATH=/tmp/evil", ["PATH=/tmp/evil"]),
    ("echo ${HOME}/x $((1 + 2))", ["echo ${HOME}/x $((1 + 2))"]),
    ("", []),
])
def test_split_parts(command, expected):
    assert commands(command) == (expected, True, "")


@pytest.mark.parametrize("command, expected", [
    ("cat <<EOF\nrm -rf /\nEOF", (["cat"], False, "heredoc")),
    ("diff <(ls a) <(ls b)", (["ls a", "ls b", "diff"], False, "process substitution")),
    ("echo 'unterminated", (["echo 'unterminated"], False, "unbalanced quote")),
    ('echo "unterminated', (['echo "unterminated'], False, "unbalanced quote")),
    ("echo `date", (["date", "echo `date"], False, "unbalanced backquote")),
    ("(ls", (["ls"], False, "unbalanced parenthesis")),
    ("ls )", (["ls"], False, "unbalanced parenthesis")),
    ("echo $(ls", (["ls", "echo $(ls"], False, "unbalanced parenthesis")),
    ("case $x in a) rm x;; esac", (["case $x in a rm x", "esac"], False, "case statement")),
    ("f() { rm -rf /; }; f", (["f { rm -rf /", "f"], False, "unsupported '(' syntax (function, array or arithmetic)")),
    ("echo ${x:-$(rm y)}", (["echo ${x:-$(rm y)}"], False, "command substitution inside ${ } or $(( ))")),
    ("cat >", (["cat"], False, "redirection without a target")),
])
def test_unparseable_commands_are_flagged(command, expected):
    """The parts found so far still come back (deny rules apply to them); ok=False makes the caller ask."""
    assert commands(command) == expected


def test_part_fields():
    split = split_command("FOO=1 BAR='x y' npm run \"test\" -- -k 'a b' > out.txt 2>&1")
    assert split == Split([Part(command="npm run \"test\" -- -k 'a b' > out.txt 2>&1",
                                argv=["npm", "run", "test", "--", "-k", "a b"],
                                env=["FOO=1", "BAR='x y'"],
                                redirects=[(">", "out.txt"), ("2>&", "1")])], ok=True)


def test_nesting_is_bounded():
    deep = "$(" * 40 + "ls" + ")" * 40
    assert split_command("echo " + deep).problem == "too deeply nested"


def test_random_input_never_raises():
    """Whatever the model sends, the splitter answers (possibly ok=False) instead of crashing or hanging."""
    pieces = list("ab $()`'\"\\;&|<>\n#{}!=-*~./0") + ["$(", "<<", "&&", "${", "$((", "))", "2>&1", "case", "; then "]
    rng = random.Random(0)
    for _ in range(3000):
        command = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 40)))
        split = split_command(command)
        assert split.ok == (split.problem == "")
