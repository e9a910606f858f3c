"""Candidates combined function by function (agent/pipeline/mix.py, tries.mixed): real files, real checks."""
import ast
import sys

from agent.pipeline import mix, tries

STUB = '''"""Two helpers."""
import re


def words(text):
    """Lower-case words."""
    raise NotImplementedError


def count(text):
    raise NotImplementedError
'''

# Each candidate gets one function right and the other wrong.
WORDS_RIGHT = '''"""Two helpers."""
import re


def words(text):
    """Lower-case words."""
    return re.findall(r"[a-z]+", text.lower())


def count(text):
    return len(text)
'''

COUNT_RIGHT = '''"""Two helpers."""
import re
from collections import Counter


@staticmethod
def _unused():
    return None


def words(text):
    """Lower-case words."""
    return text.split()


def count(text):
    return sum(_tally(text).values())


def _tally(text):
    return Counter(re.findall(r"[a-z]+", text.lower()))
'''

TESTS = '''import unittest

from helpers import count, words


class T(unittest.TestCase):
    def test_words(self):
        self.assertEqual(words("Go, go"), ["go", "go"])

    def test_words_empty(self):
        self.assertEqual(words(""), [])

    def test_count(self):
        self.assertEqual(count("a-b c"), 3)


if __name__ == "__main__":
    unittest.main()
'''


def test_a_swap_brings_the_donors_helpers_and_imports_along():
    mixed = mix.swap(WORDS_RIGHT, COUNT_RIGHT, ["count"])
    ns: dict = {}
    exec(compile(mixed, "helpers.py", "exec"), ns)
    assert ns["words"]("Go, go") == ["go", "go"] and ns["count"]("a-b c") == 3
    assert "from collections import Counter" in mixed.split("def words")[0]  # with the imports, not at the end
    assert "_unused" not in mixed  # a helper the swapped def does not use stays out
    assert mixed.startswith('"""Two helpers."""')


def test_a_swapped_function_brings_the_constant_it_uses():
    donor = 'import re\n\nWORD = re.compile(r"[a-z]+")\n\n\ndef words(text):\n    return WORD.findall(text.lower())\n'
    base = "import re\n\n\ndef words(text):\n    return text.split()\n\n\ndef count(text):\n    return 0\n"
    ns: dict = {}
    exec(compile(mix.swap(base, donor, ["words"]), "m.py", "exec"), ns)
    assert ns["words"]("Go, go") == ["go", "go"] and ns["count"]("") == 0


def test_single_swaps_skip_defs_that_differ_only_in_layout():
    same_words = WORDS_RIGHT.replace('return re.findall(r"[a-z]+", text.lower())',
                                     "return re.findall( r'[a-z]+' , text.lower() )  # same")
    assert mix.single_swaps(WORDS_RIGHT, [same_words]) == []
    swaps = mix.single_swaps(WORDS_RIGHT, [COUNT_RIGHT])
    assert sorted(name for _, _, name in swaps) == ["count", "words"]
    assert all(ast.parse(m) for m, _, _ in swaps)


def test_a_donor_that_does_not_parse_gives_no_mix():
    assert mix.single_swaps(WORDS_RIGHT, ["def count(:\n"]) == []
    assert mix.swap(WORDS_RIGHT, "def count(:\n", ["count"]) is None
    assert mix.swap(WORDS_RIGHT, COUNT_RIGHT, ["missing"]) is None


def test_when_no_candidate_passes_a_mix_of_two_can(tmp_path):
    target = tmp_path / "helpers.py"
    target.write_text(STUB)
    (tmp_path / "test_helpers.py").write_text(TESTS)
    commands = [f"{sys.executable} -m unittest -q test_helpers.py"]
    env = {"PATH": "/usr/bin:/bin"}
    tried = tries.evaluate([(WORDS_RIGHT, -0.2), (COUNT_RIGHT, -0.3)], target, STUB, "Implement helpers.py.",
                           commands, tmp_path, env)
    assert [t.passed for t in tried] == [False, False]
    mixes = tries.mixed(tried, target, STUB, "Implement helpers.py.", commands, tmp_path, env)
    won = tries.choose(tried + mixes, STUB)
    assert won is not None and won.label.startswith("#1 with count from #2")
    ns: dict = {}
    exec(compile(won.content, "helpers.py", "exec"), ns)
    assert ns["words"]("Go, go") == ["go", "go"] and ns["count"]("a-b c") == 3
    assert target.read_text() == STUB  # checked in place, left as it was


def test_swaps_that_each_pass_more_are_combined(tmp_path):
    """No single swap passes: the nearest needs one def from each of two other candidates."""
    def source(a, b, c):
        return f"def a():\n    return {a}\n\n\ndef b():\n    return {b}\n\n\ndef c():\n    return {c}\n"
    stub = source("None", "None", "None")
    target = tmp_path / "trio.py"
    target.write_text(stub)
    (tmp_path / "check.py").write_text("import trio as m\nn = (m.a() == 1) + (m.b() == 2) + (m.c() == 3)\n"
                                       "print(f'{n} passed')\nraise SystemExit(n != 3)\n")
    commands = [f"{sys.executable} check.py"]
    env = {"PATH": "/usr/bin:/bin"}
    tried = tries.evaluate([(source(0, 0, 3), -0.1), (source(1, 0, 0), -0.5), (source(0, 2, 0), -0.6)], target,
                           stub, "Implement trio.py.", commands, tmp_path, env)
    assert [t.score for t in tried] == [1, 1, 1]
    mixes = tries.mixed(tried, target, stub, "Implement trio.py.", commands, tmp_path, env)
    assert [t.score for t in mixes] == [2, 0, 2, 3] and [t.passed for t in mixes] == [False] * 3 + [True]
    won = tries.choose(tried + mixes, stub)
    assert won is not None and "swaps" in won.label and won.content == source(1, 2, 3)


def test_nothing_is_mixed_once_a_candidate_passes_or_for_other_files(tmp_path):
    target = tmp_path / "helpers.py"
    passing = tries.Tried(0, WORDS_RIGHT, -0.1, True, "", 3)
    failing = tries.Tried(1, COUNT_RIGHT, -0.2, False, "", 1)
    assert tries.mixed([passing, failing], target, STUB, "", ["true"], tmp_path, {}) == []
    assert tries.mixed([failing, failing], tmp_path / "conf.json", "{}", "", ["true"], tmp_path, {}) == []
