"""Spliced candidates: no candidate passed, but each definition is right in one of them. Real files, real pytest
and unittest runs, the scripted engine."""
import time

import pytest

from agent.pipeline import tries
from agent.pipeline.splice import best_splice, definitions, spliced
from agent.pipeline.tries import Tried, evaluate

STUB = ('"""Text helpers."""\n\n\ndef shout(s):\n    raise NotImplementedError\n\n\n'
        'def initials(name):\n    raise NotImplementedError\n')
TESTS = ("from words import shout, initials\n\n\ndef test_shout():\n    assert shout('hi') == 'HI!'\n\n\n"
         "def test_shout_empty():\n    assert shout('') == '!'\n\n\n"
         "def test_initials():\n    assert initials('ada king lovelace') == 'AKL'\n")
GOOD_SHOUT = "def shout(s):\n    return s.upper() + '!'\n"
BAD_SHOUT = "def shout(s):\n    return s.upper()\n"
GOOD_INITIALS = "def initials(name):\n    return ''.join(w[0].upper() for w in name.split())\n"
BAD_INITIALS = "def initials(name):\n    return name[:3].upper()\n"
REQUEST = "Implement the stubs in words.py so that the tests in test_words.py pass."


def module(shout, initials, head='"""Text helpers."""\n'):
    return f"{head}\n\n{shout}\n\n{initials}"


@pytest.fixture
def check(pipeline_proj):
    """The stub and its pytest file in a project; evaluates (content, mean log-probability) pairs against them."""
    (pipeline_proj / "words.py").write_text(STUB)
    (pipeline_proj / "test_words.py").write_text(TESTS)
    return lambda pairs: evaluate(pairs, pipeline_proj / "words.py", STUB, REQUEST,
                                  ["python -m pytest -q test_words.py"], pipeline_proj, None)


def test_one_definition_is_taken_from_the_donor_with_the_imports_and_helpers_it_needs():
    base = module(BAD_SHOUT, BAD_INITIALS)
    donor = ('"""Text helpers."""\nimport re\n\n\ndef _words(name):\n    return re.findall(r"\\w+", name)\n\n\n'
             + BAD_SHOUT + "\n\n" + "def initials(name):\n    return ''.join(w[0].upper() for w in _words(name))\n")
    out = spliced(base, donor, "initials")
    namespace = {}
    exec(out, namespace)
    assert namespace["initials"]("ada king-lovelace") == "AKL" and namespace["shout"]("a") == "A"
    assert out.startswith('"""Text helpers."""\nimport re\n') and out.count("def shout") == 1
    assert spliced(base, donor, "missing") is None and spliced("def f(:\n", donor, "initials") is None


def test_methods_are_spliced_in_their_class_with_the_helpers_they_call_before_it():
    base = "X = 1\n\n\nclass C:\n    def a(self):\n        return 1\n\n    def b(self):\n        return 2\n"
    donor = "class C:\n    def a(self):\n        return 10\n\n    def b(self):\n        return 20\n"
    out = spliced(base, donor, "C.b")
    assert out == base.replace("return 2", "return 20") and set(definitions(out)) == {"C.a", "C.b"}
    helped = "def _twenty():\n    return 20\n\n\n" + donor.replace("return 20", "return _twenty()")
    out = spliced(base, helped, "C.b")
    assert out.startswith("X = 1\n\n\ndef _twenty():\n") and "return 10" not in out
    namespace = {}
    exec(out, namespace)
    assert namespace["C"]().b() == 20 and namespace["C"]().a() == 1


def test_a_carriage_return_inside_a_string_is_no_line_break_for_the_cut():
    base = 'def a():\n    """x\ry"""\n    return 1\n\n\ndef b():\n    return 2\n'
    assert spliced(base, base.replace("return 2", "return 3"), "b") == base.replace("return 2", "return 3")
    assert spliced(base, base.replace("return 1", "return 4"), "a") == base.replace("return 1", "return 4")


def test_a_file_right_in_no_candidate_is_spliced_from_two_and_passes(pipeline_proj, check):
    tried = check([(module(GOOD_SHOUT, BAD_INITIALS), -0.2), (module(BAD_SHOUT, GOOD_INITIALS), -0.1)])
    assert [t.score for t in tried] == [2, 1] and not any(t.passed for t in tried)
    joined, checks = best_splice(tried, STUB, check)
    assert joined.passed and checks == 2 and joined.content == module(GOOD_SHOUT, GOOD_INITIALS)
    assert (pipeline_proj / "words.py").read_text() == STUB  # checked in place, then put back
    # nothing better to take: no spliced file comes back, and one changed definition is never spliced
    assert best_splice(check([(module(GOOD_SHOUT, BAD_INITIALS), 0.0), (module(BAD_SHOUT, BAD_INITIALS), 0.0)]),
                       STUB, check)[0] is None
    one = STUB.replace("def shout(s):\n    raise NotImplementedError", GOOD_SHOUT.rstrip())
    assert best_splice([Tried(0, module(GOOD_SHOUT, BAD_INITIALS), 0.0, False, score=2),
                        Tried(1, module(GOOD_SHOUT, GOOD_INITIALS), 0.0, False, score=1)], one, check) == (None, 0)


def test_unittest_runs_count_their_passed_tests(pipeline_proj):
    (pipeline_proj / "words.py").write_text(STUB)
    (pipeline_proj / "test_words.py").write_text(
        "import unittest\n\nfrom words import shout, initials\n\n\nclass T(unittest.TestCase):\n"
        "    def test_shout(self):\n        self.assertEqual(shout('hi'), 'HI!')\n\n"
        "    def test_initials(self):\n        self.assertEqual(initials('ada king'), 'AK')\n\n"
        "    def test_more(self):\n        self.assertEqual(initials('x y z'), 'XYZ')\n\n"
        "    @unittest.skip('later')\n    def test_skipped(self):\n        pass\n\n"
        "    @unittest.expectedFailure\n    def test_known(self):\n        self.assertEqual(shout(''), 'no')\n")
    tried = evaluate([(module(GOOD_SHOUT, BAD_INITIALS), 0.0), (module(BAD_SHOUT, GOOD_INITIALS), 0.0)],
                     pipeline_proj / "words.py", STUB, REQUEST, ["python -m unittest test_words"], pipeline_proj, None)
    assert [(t.score, t.failures) for t in tried] == [(2, 2), (3, 1)]  # an expected failure passes, a skip is none


def test_in_the_pipeline_the_spliced_file_is_written_when_no_candidate_passed(pipeline_proj, pipeline_agent):
    (pipeline_proj / "words.py").write_text(STUB)
    (pipeline_proj / "test_words.py").write_text(TESTS)
    agent, engine, steps = pipeline_agent(pipeline_proj, [
        {"candidates": [module(GOOD_SHOUT, BAD_INITIALS) + "```", module(BAD_SHOUT, GOOD_INITIALS) + "```"]}], tries=2)
    result = agent.run(REQUEST)
    assert result.text.startswith("Changed words.py") and len(engine.requests) == 1
    assert ("splice", "2 files spliced from the candidates checked, one passed") in steps
    assert ("tries", "2 candidates, 0 passed, applied the spliced file") in steps
    assert (pipeline_proj / "words.py").read_text() == module(GOOD_SHOUT, GOOD_INITIALS)


def test_a_definition_every_candidate_wrote_alike_is_passed_over_not_the_end_of_the_search(check):
    # shout is the same wrong one in both: initials is still tried (from the other, no better)
    tried = check([(module(BAD_SHOUT, GOOD_INITIALS), -0.2), (module(BAD_SHOUT, BAD_INITIALS), -0.1)])
    assert [t.score for t in tried] == [1, 0]
    assert best_splice(tried, STUB, check) == (None, 1)


def test_imports_go_after_the_opening_ones_never_a_future_import_or_above_a_shebang():
    base = "#!/usr/bin/env python3\ndef a():\n    return 1\n\n\ndef b():\n    return 2\n"
    donor = ("from __future__ import annotations\nimport math\n\n\ndef a():\n    return 1\n\n\n"
             "def b():\n    return math.floor(2.5)\n")
    out = spliced(base, donor, "b")
    assert out.startswith("#!/usr/bin/env python3\nimport math\n") and "__future__" not in out
    late = '"""Doc."""\nimport os\n\nX = 1\nimport sys\n\n\ndef b():\n    return 2\n'
    assert spliced(late, donor, "b").startswith('"""Doc."""\nimport os\nimport math\n\nX = 1\n')
    feed = "def a():\n    return 'x\\fy'\n\n\ndef b():\n    return 2\n"  # a form feed inside a string: one line
    assert spliced(feed, feed.replace("return 2", "return 3"), "b") == feed.replace("return 2", "return 3")


def test_past_the_deadline_no_check_starts_and_none_runs_past_it(pipeline_proj, check):
    tried = check([(module(GOOD_SHOUT, BAD_INITIALS), -0.2), (module(BAD_SHOUT, GOOD_INITIALS), -0.1)])
    assert best_splice(tried, STUB, check, deadline=time.monotonic()) == (None, 0)
    pairs = [(module(GOOD_SHOUT, GOOD_INITIALS), 0.0)] * 2
    assert evaluate(pairs, pipeline_proj / "words.py", STUB, REQUEST, ["python -m pytest -q test_words.py"],
                    pipeline_proj, None, deadline=time.monotonic()) == []
    (pipeline_proj / "test_words.py").write_text(TESTS + "\n\ndef test_slowly():\n    import time\n    time.sleep(30)\n")
    start = time.monotonic()
    tried = evaluate([(module(GOOD_SHOUT, GOOD_INITIALS), 0.0), (module(BAD_SHOUT, GOOD_INITIALS), 0.0)],
                     pipeline_proj / "words.py", STUB, REQUEST, ["python -m pytest -q test_words.py"], pipeline_proj,
                     None, deadline=start + 3)
    # the first check is cut at the deadline (a failure), the second never starts; the file is as it was
    assert len(tried) == 1 and not tried[0].passed and time.monotonic() - start < 10
    assert (pipeline_proj / "words.py").read_text() == STUB


def test_in_the_pipeline_no_check_or_splice_runs_into_the_answers_reserve(pipeline_proj, pipeline_agent,
                                                                          monkeypatch):
    (pipeline_proj / "words.py").write_text(STUB)
    # every check takes over 2 s and the run's checks must end 1.5 s after it began: the first candidate's check is
    # cut there, the second's never starts, and no splice follows (both run, and the splice passes, without a limit)
    (pipeline_proj / "test_words.py").write_text(TESTS + "\n\ndef test_slowly():\n    import time\n    time.sleep(2)\n")
    agent, engine, steps = pipeline_agent(pipeline_proj, [
        {"candidates": [module(GOOD_SHOUT, BAD_INITIALS) + "```", module(BAD_SHOUT, GOOD_INITIALS) + "```"]}] * 3,
        tries=2)
    monkeypatch.setattr(tries, "CHECKS_RESERVE_S", 100.0)  # a long reserve: the limit stays far away
    agent.config.max_wall_s = 101.5
    result = agent.run(REQUEST)
    assert result.stop_reason == "end_turn" and result.text.startswith("words.py: not changed; ")
    assert not [s for s in steps if s[0] == "splice"] and (pipeline_proj / "words.py").read_text() == STUB
    # the repair rounds that followed drew candidates but checked none of them
    assert len(engine.requests) > 1 and all(d.startswith("2 candidates, 0 passed") for s, d in steps if s == "tries")
