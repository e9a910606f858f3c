"""Stub files in the pipeline: the reply starts after the copied head, and forgotten standard imports are added.
Scripted engine, real files, real pytest runs."""
from pathlib import Path

import pytest

from agent.pipeline.checks import first_line
from agent.pipeline.imports import add_missing_imports
from agent.pipeline.windows import stub_head

HEAD = '"""Geometry helpers."""\n\n\ndef double(x):\n    return 2 * x\n\n\ndef hypot(a, b):\n    """The hypotenuse."""\n'
STUB = HEAD + "    raise NotImplementedError\n\n\ndef half(x):\n    return x / 2\n"
TESTS = "from geo import hypot, half\n\n\ndef test_hypot():\n    assert hypot(3, 4) == 5\n\n\ndef test_half():\n" \
        "    assert half(4) == 2\n"
REQUEST = "Implement the stub in geo.py so that the tests in test_geo.py pass."


@pytest.fixture
def stub_agent(pipeline_proj, pipeline_agent):
    """make(turns) -> (agent, engine, proj, steps): geo.py with a stub and its tests, the pipeline with two
    candidates a round."""
    def make(turns):
        (pipeline_proj / "geo.py").write_text(STUB)
        (pipeline_proj / "test_geo.py").write_text(TESTS)
        agent, engine, steps = pipeline_agent(pipeline_proj, turns, tries=2)
        return agent, engine, pipeline_proj, steps
    return make


@pytest.mark.parametrize("body", ["    raise NotImplementedError\n", "    raise NotImplementedError('later')\n",
                                  "    pass\n", "    ...\n"])
def test_the_head_is_the_file_before_the_first_stub_body(body):
    text = HEAD + body + "\n\nclass Shape:\n    def area(self):\n        pass\n"
    assert stub_head(text, REQUEST, Path("geo.py")) == HEAD


def test_a_docstring_only_stub_keeps_its_docstring_in_the_head_and_the_earliest_stub_wins():
    text = "class Shape:\n    def area(self):\n        \"\"\"Area.\"\"\"\n\n    def name(self):\n        pass\n"
    assert stub_head(text, REQUEST, Path("geo.py")) == "class Shape:\n    def area(self):\n        \"\"\"Area.\"\"\"\n"


@pytest.mark.parametrize("text,request_,name", [
    (STUB, "Fix the bug in geo.py.", "geo.py"),  # not a request about stubs: the whole file may change
    (STUB, REQUEST, "geo.txt"),
    (HEAD + "    return 1\n", REQUEST, "geo.py"),  # nothing left to implement
    ("def f(:\n    pass\n", REQUEST, "geo.py"),
    ("def f(): pass\n", REQUEST, "geo.py"),  # the body shares the def's line: nothing to keep before it
])
def test_no_head_without_a_stub_request_a_python_file_or_a_stub_on_its_own_line(text, request_, name):
    assert stub_head(text, request_, Path(name)) == ""


def test_standard_modules_and_well_known_names_get_their_imports(tmp_path):
    src = '"""Doc."""\nimport re\n\n\ndef f(xs):\n    c = Counter(xs)\n    return math.sqrt(len(c)), undefined_thing\n'
    assert add_missing_imports(src, tmp_path / "m.py", tmp_path, []) == src.replace(
        "import re\n", "import re\nimport math\nfrom collections import Counter\n")
    (tmp_path / "math.py").write_text("def sqrt(x):\n    return x\n")  # a project module shadows the stdlib one
    assert "import math" not in add_missing_imports(src, tmp_path / "m.py", tmp_path, [])


def test_a_stub_requests_retry_decodes_only_the_body_and_the_rest_after_the_head(stub_agent):
    rest = "\n\ndef half(x):\n    return x / 2\n```"
    wrong = STUB.replace("raise NotImplementedError", "return a + b")
    agent, engine, proj, steps = stub_agent([
        {"candidates": [wrong + "```"]},  # the first round writes the whole file: it fails
        {"candidates": ["    return (a + b) ** 0.5" + rest,  # wrong: fails the test
                        "    return math.sqrt(a * a + b * b)" + rest]}])
    result = agent.run(REQUEST)
    assert result.text.startswith("Changed geo.py") and ("tries", "2 candidates, 1 passed, applied #2") in steps
    assert engine.requests[0].reply_prefix == "```python\n"  # its imports first, as the model would write it
    assert engine.requests[1].reply_prefix == "```python\n" + HEAD
    assert engine.requests[1].sampling.max_tokens == 256 + 2 * engine.count_tokens(STUB[len(HEAD):])  # the head is given
    assert (proj / "geo.py").read_text() == HEAD.replace('"""\n\n\n', '"""\nimport math\n\n\n', 1) + \
        "    return math.sqrt(a * a + b * b)\n\n\ndef half(x):\n    return x / 2\n"


def test_a_failure_is_quoted_by_its_assertion_not_a_source_line_that_says_error():
    out = '    def f():\n        """Raises ValueError for x."""\n>       assert f() == 2\nE       AssertionError: 1 != 2\n' \
          'FAILED test_x.py::test_f'
    assert first_line(out) == "E       AssertionError: 1 != 2"
    assert first_line("Traceback\nValueError: bad\n") == "ValueError: bad"


@pytest.mark.parametrize("request_", [
    "geo.py raises NotImplementedError in hypot. Write it so the tests pass.",
    "The functions in geo.py are not written yet. Write them so the unit tests pass.",
    "Fill in the missing function body in geo.py.", "Complete geo.py so test_geo.py passes.",
])
def test_the_ways_a_request_asks_for_stubs_to_be_written(request_):
    assert stub_head(STUB, request_, Path("geo.py")) == HEAD


@pytest.mark.parametrize("second,rounds", [("    return a + b", 2),  # the shown change again: no third round
                                           ("    return a - b", 3)])  # another wrong one: the third round runs
def test_retries_end_when_a_round_comes_back_with_the_change_the_note_showed(stub_agent, second, rounds):
    rest = "\n\ndef half(x):\n    return x / 2\n```"
    agent, engine, proj, _ = stub_agent([
        {"candidates": [STUB.replace("raise NotImplementedError", "return a + b") + "```"]},
        {"candidates": [second + rest]},
        {"candidates": ["    return (a * a + b * b) ** 0.5" + rest]}])
    result = agent.run(REQUEST)
    assert len(engine.requests) == rounds
    assert result.text.startswith("Changed geo.py" if rounds == 3 else "geo.py: not changed")
    assert (proj / "geo.py").read_text() == (STUB if rounds == 2 else
                                             STUB.replace("raise NotImplementedError", "return (a * a + b * b) ** 0.5"))


def test_after_a_failed_first_round_the_next_is_sampled_in_the_bare_shape_then_repairs_resume(pipeline_proj,
                                                                                                pipeline_agent):
    (pipeline_proj / "geo.py").write_text(STUB)
    (pipeline_proj / "test_geo.py").write_text(TESTS)
    rest = "\n\ndef half(x):\n    return x / 2\n```"
    first_try = STUB.replace("raise NotImplementedError", "return a + b").replace("x / 2", "x / 3")  # 0 tests pass
    agent, engine, steps = pipeline_agent(pipeline_proj, [
        {"candidates": [first_try + "```"]},
        {"candidates": ["    return a * b" + rest]},  # the fresh look: wrong too, but test_half passes
        {"candidates": ["    return (a * a + b * b) ** 0.5" + rest]}], tries=2, fresh=True)
    result = agent.run(REQUEST)
    assert result.text.startswith("Changed geo.py")
    first, fresh, repair = engine.requests
    assert fresh.session_id == agent.session.session_id + "~fresh" and fresh.tools == [] and first.tools
    assert [m["role"] for m in fresh.messages] == ["system", "user"]
    user = fresh.messages[1]["content"]
    assert user.startswith(f"Here are the files of my project.\n\ngeo.py\n```python\n{STUB}```\n\n"
                           f"test_geo.py\n```python\n{TESTS}```\n\n{REQUEST}\n\nChange only geo.py.")
    assert "tried" not in user and "failed" not in user  # no earlier attempt, no harness note
    assert fresh.reply_prefix == "```python\n" + HEAD  # the head is given, as in any retry
    assert ("edit", "geo.py (whole file, try 2, a fresh look)") in steps
    assert ("tries", "1 candidates, 0 passed (the nearest passed 1 test), applied #1") in steps
    assert repair.session_id == agent.session.session_id and "+    return a * b" in repair.messages[-1]["content"]
    assert ("edit", "geo.py (whole file, try 3)") in steps
    assert (pipeline_proj / "geo.py").read_text().endswith("    return (a * a + b * b) ** 0.5\n\n\n"
                                                           "def half(x):\n    return x / 2\n")


@pytest.mark.parametrize("first_half", ["x / 2", "x / 4"])  # the first round's nearest passed 1 test, or none
def test_a_fresh_look_that_comes_no_nearer_than_the_first_round_ends_the_file(pipeline_proj, pipeline_agent,
                                                                              first_half):
    (pipeline_proj / "geo.py").write_text(STUB)
    (pipeline_proj / "test_geo.py").write_text(TESTS)
    first_try = STUB.replace("raise NotImplementedError", "return a + b").replace("x / 2", first_half)
    agent, engine, steps = pipeline_agent(pipeline_proj, [
        {"candidates": [first_try + "```"]},
        {"candidates": ["    return a * b\n\n\ndef half(x):\n    return x / 3\n```"]},  # 0 tests pass
        {"candidates": ["    return (a * a + b * b) ** 0.5\n\n\ndef half(x):\n    return x / 2\n```"]}],
        tries=2, fresh=True)
    result = agent.run(REQUEST)
    assert len(engine.requests) == 2  # no third round: a repair would start from the same miss
    assert not any(detail.endswith("try 3)") for _, detail in steps)
    assert result.text.startswith("geo.py: not changed; `python -m pytest")
    assert (pipeline_proj / "geo.py").read_text() == STUB


TWO_STUBS = HEAD + "    raise NotImplementedError\n\n\ndef half(x):\n    \"\"\"Half.\"\"\"\n    raise NotImplementedError\n"


@pytest.mark.parametrize("request_", [REQUEST, "Write hypot and half in geo.py; test_geo.py has the tests."])
def test_a_fresh_look_splices_with_the_first_rounds_candidates(pipeline_proj, pipeline_agent, request_):
    (pipeline_proj / "geo.py").write_text(TWO_STUBS)
    (pipeline_proj / "test_geo.py").write_text(TESTS)
    hypot_right = TWO_STUBS.replace("raise NotImplementedError", "return (a * a + b * b) ** 0.5", 1) \
        .replace("raise NotImplementedError", "return x / 3")  # test_hypot passes, test_half fails
    half_right = "    return a + b\n\n\ndef half(x):\n    \"\"\"Half.\"\"\"\n    return x / 2\n```"  # the other way round
    if request_ != REQUEST:  # no stub named in the request: the reply is the whole file, not what follows its head
        half_right = HEAD + half_right
    agent, engine, steps = pipeline_agent(pipeline_proj, [{"candidates": [hypot_right + "```"]},
                                                          {"candidates": [half_right]}], tries=2, fresh=True)
    result = agent.run(request_)  # a file with stubs, asked for in any words
    assert len(engine.requests) == 2 and ("edit", "geo.py (whole file, try 2, a fresh look)") in steps
    # one candidate in the fresh look: only the first round's gives the splice a second version of each function
    assert ("splice", "1 files spliced from the candidates checked, one passed") in steps
    assert result.text.startswith("Changed geo.py")
    text = (pipeline_proj / "geo.py").read_text()
    assert "return (a * a + b * b) ** 0.5" in text and "return x / 2" in text


def test_a_stubs_fresh_look_draws_its_own_batches(pipeline_proj, pipeline_agent):
    (pipeline_proj / "geo.py").write_text(STUB)
    (pipeline_proj / "test_geo.py").write_text(TESTS)
    wrong = STUB.replace("raise NotImplementedError", "return a + b")
    rest = "\n\ndef half(x):\n    return x / 2\n```"
    agent, engine, steps = pipeline_agent(pipeline_proj, [
        {"candidates": [wrong + "```"] * 2},  # the first round: the profile's one batch
        {"candidates": ["    return a - b" + rest, "    return b" + rest]},
        {"candidates": ["    return a * b" + rest, "    return a" + rest]},
        {"candidates": ["    return a" + rest, "    return (a * a + b * b) ** 0.5" + rest]}], tries=2, fresh=True)
    agent.driver.config.stub_batches = 3
    result = agent.run(REQUEST)
    assert [r.session_id.endswith("~fresh") for r in engine.requests] == [False, True, True, True]
    assert result.text.startswith("Changed geo.py") and ("tries", "6 candidates, 1 passed, applied #6") in steps


def test_a_round_that_would_end_past_the_wall_clock_limit_is_not_started(pipeline_proj, pipeline_agent):
    (pipeline_proj / "geo.py").write_text(STUB)
    # every check takes 2 s: after the first round's batch, the next would end within the 15 s reserve
    (pipeline_proj / "test_geo.py").write_text(TESTS + "\n\ndef test_slowly():\n    import time\n    time.sleep(2)\n")
    wrong = STUB.replace("raise NotImplementedError", "return a + b")
    agent, engine, steps = pipeline_agent(pipeline_proj, [
        {"candidates": [wrong + "```"] * 2}, {"candidates": ["    return (a * a + b * b) ** 0.5\n```"] * 2}],
        tries=2, fresh=True)
    agent.config.max_wall_s = 16.5
    result = agent.run(REQUEST)
    assert len(engine.requests) == 1 and result.stop_reason == "end_turn"
    assert ("tries", "none: a batch would end past --max-time") in steps
    assert result.text.startswith("geo.py: not changed; `python -m pytest") and \
        result.text.endswith("; no time was left for another round.")
    assert (pipeline_proj / "geo.py").read_text() == STUB


def test_without_a_sampled_first_round_there_is_no_fresh_look(pipeline_proj, pipeline_agent):
    (pipeline_proj / "geo.py").write_text(STUB)  # no test file: nothing to check, so round 1 is one greedy reply
    dropped = "```python\n" + HEAD + "    return 5\n```"  # it loses half(): refused, and round 2 is sampled
    agent, engine, steps = pipeline_agent(pipeline_proj, [{"text": dropped}, {"candidates": ["    return 5" + "\n```"]}],
                                          tries=2, fresh=True)
    agent.run("Implement the stub hypot in geo.py.")
    assert len(engine.requests) >= 2 and any(step == "tries" for step, _ in steps)
    assert all(not r.session_id.endswith("~fresh") for r in engine.requests)
    assert not any("fresh look" in detail for _, detail in steps)


def test_the_small_profile_takes_the_fresh_look_and_settings_may_turn_it_off():
    from agent.core.profile import ProfileError, choose_profile
    assert choose_profile(None, "small").fresh_look is True
    assert choose_profile(None, {"name": "small", "fresh_look": False}).fresh_look is False
    assert choose_profile(None, "default").fresh_look is False
    with pytest.raises(ProfileError, match="fresh_look must be true or false"):
        choose_profile(None, {"name": "small", "fresh_look": "yes"})


def test_a_candidate_cut_off_at_the_token_limit_is_not_checked_or_applied(stub_agent):
    right = STUB.replace("raise NotImplementedError", "return math.sqrt(a * a + b * b)")
    cut = right.replace("\n\n\ndef half(x):\n    return x / 2\n", "\n\n\ndef half(x):\n    return x / 2\n" * 3)
    agent, engine, proj, steps = stub_agent([
        {"candidates": [{"text": cut, "finish_reason": "max_tokens"}, right + "```"]}])
    result = agent.run(REQUEST)
    assert result.text.startswith("Changed geo.py") and ("tries", "2 candidates, 1 passed, applied #2") in steps
