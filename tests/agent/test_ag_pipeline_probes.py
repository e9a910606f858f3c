"""What the pipeline finds before a fix without the model: ruff's bug patterns in the file, and the calls a failing
test makes into the project (a real pytest run under the plugin). Real files, real subprocesses, scripted engine."""
import sys
from pathlib import Path

import pytest

from agent.core.profile import ProfileError, choose_profile
from agent.pipeline import call_trace, call_trace_plugin, oracle
from agent.pipeline.call_trace import Call, parse_trace, trace_failing_test, traced_command
from agent.pipeline.lint import bug_findings

STOCK = ('def parse_stock(lines, stock={}):\n    for line in lines:\n        item, qty = line.split(",")\n'
         '        stock[item] = stock.get(item, 0) + int(qty)\n    return stock\n')
STOCK_TESTS = ('from stock import parse_stock\n\n\ndef test_first():\n    assert parse_stock(["a,1"]) == {"a": 1}\n\n\n'
               'def test_second_call_starts_empty():\n    parse_stock(["a,1"])\n'
               '    assert parse_stock(["b,2"]) == {"b": 2}\n')
FIXED = STOCK.replace("stock={}):\n", "stock=None):\n    stock = {} if stock is None else stock\n")
MONEY = 'def cents(text):\n    whole, frac = text.split(".")\n    return int(whole) * 100 + int(frac)\n'
ORDERS = "from money import cents\n\n\ndef total(prices):\n    return sum(cents(p) for p in prices)\n"
ORDER_TESTS = ('from orders import total\n\n\ndef test_two_places():\n    assert total(["1.25"]) == 125\n\n\n'
               'def test_one_place():\n    assert total(["4.5", "1.25"]) == 575\n')


@pytest.fixture
def proj(pipeline_proj):
    return pipeline_proj


@pytest.fixture
def make(pipeline_agent):
    return pipeline_agent


def test_ruff_bug_patterns_become_sentences_and_style_or_syntax_does_not():
    found = bug_findings(STOCK, Path("stock.py"), "stock.py")
    assert found == ["stock.py line 1: Do not use mutable data structures for argument defaults "
                     "(`def parse_stock(lines, stock={}):`); fix: Replace with `None`; initialize within function"]
    assert bug_findings("def f(x):\n    x == 1\n    return x\n", Path("f.py"), "f.py")[0].startswith(
        "f.py line 2: Pointless comparison")
    assert bug_findings("import os\nfor line in []:\n    line = line.strip()\n", Path("ok.py"), "ok.py") == []
    assert bug_findings("def f(:\n", Path("bad.py"), "bad.py") == []  # the parse guard's business
    assert bug_findings('{"a": []}\n', Path("c.json"), "c.json") == [] and bug_findings(None, Path("n.py"), "n") == []


def test_ruffs_fix_that_passes_the_failing_check_is_written_without_the_model(proj, make):
    (proj / "stock.py").write_text(STOCK)
    (proj / "test_stock.py").write_text(STOCK_TESTS)
    agent, engine, steps = make(proj, [])
    result = agent.run("test_stock.py fails. Fix the bug in stock.py.")
    assert result.text == "Changed stock.py (ruff's fix); `python -m pytest -q -x test_stock.py` passed."
    assert engine.requests == []  # no model call: the linter's fix passed the check
    fixed = (proj / "stock.py").read_text()
    assert "def parse_stock(lines, stock=None):" in fixed and "stock = {}" in fixed
    assert ("lint-fix", "stock.py: ruff's fix of stock.py line 1: Do not use mutable data structures for argument "
            "defaults (`def parse_stock(lines, stock={}):`); fix: Replace with `None`; initialize within function "
            "passed the check") in steps
    writes = [m for m in agent.session.messages if m.get("tool_calls") and
              m["tool_calls"][0]["function"]["name"] == "Write"]
    assert len(writes) == 1  # the fix is a harness Write in the history, then the check through Bash


def test_ruffs_fix_is_not_tried_without_a_runnable_failing_check(proj, make):
    (proj / "stock.py").write_text(STOCK)
    (proj / "test_stock.py").write_text(STOCK_TESTS)
    agent, engine, steps = make(proj, [{"text": f"```python\n{FIXED}```"}])
    agent.permissions.rules["allow"].clear()  # Bash needs asking: nothing shows the fix works
    agent.run("test_stock.py fails. Fix the bug in stock.py.")
    assert not any(step == "lint-fix" for step, _ in steps) and len(engine.requests) == 1


def test_a_reported_failure_leads_the_edit_note_with_the_linters_finding(proj, make):
    # ruff's fix alone leaves the second bug: it fails the check, is undone, and the model's edit step runs.
    (proj / "stock.py").write_text(STOCK.replace("int(qty)", "int(qty) - 1"))
    (proj / "test_stock.py").write_text(STOCK_TESTS)
    agent, engine, steps = make(proj, [{"text": f"```python\n{FIXED}```"}])
    result = agent.run("test_stock.py fails. Fix the bug in stock.py.")
    assert result.text == "Changed stock.py; `python -m pytest -q -x test_stock.py` passed."
    assert any(step == "lint-fix" and detail.endswith("did not pass the check") for step, detail in steps)
    note = engine.requests[0].messages[-1]["content"]
    assert "\nThe harness found: stock.py line 1: Do not use mutable data structures" in note
    assert (proj / "stock.py").read_text() == FIXED
    # Only a request that reports a failure gets findings: a stub or a new feature is not a bug hunt.
    (proj / "stock.py").write_text(STOCK)
    agent, engine, _ = make(proj, [{"text": f"```python\n{FIXED}```"}])
    agent.run("Rename qty to quantity in stock.py.")
    assert "The harness found" not in engine.requests[0].messages[-1]["content"]


def test_the_failing_tests_calls_into_the_project_are_traced_with_their_results(proj):
    (proj / "money.py").write_text(MONEY)
    (proj / "orders.py").write_text(ORDERS)
    (proj / "test_orders.py").write_text(ORDER_TESTS)
    trace = trace_failing_test("python -m pytest -q -x test_orders.py", proj, {"PATH": "/usr/bin:/bin"})
    assert trace.calls == [Call("total", "['4.5', '1.25']", 0, "530", "orders.py"),
                           Call("cents", "'4.5'", 1, "405", "money.py"), Call("cents", "'1.25'", 1, "125", "money.py")]
    assert trace.text().splitlines() == [
        "The harness traced the failing test test_orders.py::test_one_place: the calls it made into the project's "
        "functions (callees indented) and what each returned:",
        "total(['4.5', '1.25']) returned 530", "  cents('4.5') returned 405", "  cents('1.25') returned 125"]
    (proj / "money.py").write_text(MONEY.replace("int(frac)", "int(frac.ljust(2, '0'))"))
    assert trace_failing_test("python -m pytest -q -x test_orders.py", proj, {"PATH": "/usr/bin:/bin"}) is None


def test_only_a_plain_pytest_run_is_traced_and_a_broken_record_is_no_trace():
    assert traced_command("python -m pytest -q -x test_a.py") == f"{sys.executable} -m pytest -q -x test_a.py " \
                                                                 "-p agent.pipeline.call_trace_plugin"
    assert traced_command("python main.py") is None and traced_command("python -m pytest x; rm -rf /") is None
    assert parse_trace({"test": "t", "calls": [{"name": "f"}]}) is None and parse_trace({"calls": "x"}) is None
    deep = parse_trace({"test": "t", "calls": [{"name": "f", "args": str(i), "depth": 9, "returned": None}
                                               for i in range(20)]})
    lines = deep.text().splitlines()[1:]
    assert len(lines) == call_trace.MAX_LINES + 1 and lines[0] == "        f(0) did not return" and lines[-1] == "..."
    assert (call_trace.ON_VAR, call_trace.MARK) == (call_trace_plugin.ON_VAR, call_trace_plugin.MARK)


def test_the_oracle_descends_into_the_callee_the_model_says_is_wrong():
    calls = [Call("report", "'x'", 0, "'TOTAL 9'"), Call("load", "'x'", 1, "[1, 2]", "io.py"),
             Call("total", "[1, 2]", 1, "9", "calc.py"), Call("add", "1, 2", 2, "9", "ops.py"),
             Call("fmt", "9", 1, "'TOTAL 9'", "fmt.py")]
    answers = {"load('x')": "[1, 2]", "total([1, 2])": "It should return `3`.", "add(1, 2)": "3"}
    asked = []

    def ask(q, call):
        asked.append((q, call))
        return next(a for k, a in answers.items() if f"`{k}`" in q)
    assert oracle.find_wrong_call(calls, ask) == (calls[3], "3")  # the deepest call judged wrong
    assert asked == [(oracle.question(c), c) for c in calls[1:4]]
    assert oracle.answer_start(calls[3]) == "`add(1, 2) == "
    # Every callee judged right, or answers that are not a value: no verdict (the model names the file instead).
    assert oracle.find_wrong_call(calls[:3], lambda q, call: "[1, 2]" if "load" in q else "9") is None
    assert oracle.find_wrong_call(calls[:3], lambda q, call: "I am not sure.") is None
    assert oracle.find_wrong_call(calls[:2], lambda q, call: "2") is None  # a number for a list: no verdict
    assert oracle.question(calls[1]) == "What should `load('x')` return? Reply with the list only."
    assert oracle.find_wrong_call(calls, lambda q, call: "[0]", max_questions=1) == (calls[1], "[0]")
    assert oracle.sentence(calls[3], "3") == "In short: `add(1, 2)` returns 9, but it should return 3."


def test_the_trace_and_the_oracles_verdict_choose_the_file_and_lead_its_note(proj, make):
    (proj / "money.py").write_text(MONEY)
    (proj / "orders.py").write_text(ORDERS)
    (proj / "test_orders.py").write_text(ORDER_TESTS)
    fixed = MONEY.replace("int(frac)", "int(frac.ljust(2, '0'))")
    traced = trace_failing_test("python -m pytest -q -x test_orders.py", proj, {}).text()
    agent, engine, steps = make(proj, [{"text": "450"}, {"text": f"```python\n{fixed}```"}], oracle=True)
    result = agent.run("test_orders.py fails. Find the bug and fix it.")
    assert result.text == "Changed money.py; `python -m pytest -q -x test_orders.py` passed."
    assert [s for s, _ in steps] == ["localize", "reproduce", "trace", "locate", "edit", "check", "answer"]
    assert ("locate", "money.py (`cents('4.5')` returns 405, but it should return 450.)") in steps
    assert ("edit", "money.py (lines 1-3)") in steps  # the definition judged wrong is what the reply rewrites
    # Asked without the values the calls returned (shown them, the model calls them right), nor the trace later.
    asked = engine.requests[0].messages[-1]["content"]
    assert asked == "What should `cents('4.5')` return? Reply with the number only."
    assert (engine.requests[0].sampling.max_tokens, engine.requests[0].reply_prefix) == (24 + 1, "`cents('4.5') == ")
    assert agent.session.messages[5]["content"] == "`cents('4.5') == 450`"
    assert ("trace", traced) in steps  # the user sees it
    note = engine.requests[1].messages[-1]["content"]
    assert note.startswith("In short: `total([\"4.5\", \"1.25\"])` returns 530, but the test expects 575.\n"
                           "In short: `cents('4.5')` returns 405, but it should return 450.\n") and "traced" not in note
    assert "These are lines 1-3 of money.py:\n```python\n" in note


def test_when_the_oracle_finds_nothing_the_model_names_the_file(proj, make):
    (proj / "money.py").write_text(MONEY)
    (proj / "orders.py").write_text(ORDERS)
    (proj / "test_orders.py").write_text(ORDER_TESTS)
    fixed = MONEY.replace("int(frac)", "int(frac.ljust(2, '0'))")
    agent, engine, steps = make(proj, [{"text": "405"}, {"text": "125"}, {"text": "money.py"},
                                       {"text": f"```python\n{fixed}```"}], oracle=True)
    result = agent.run("test_orders.py fails. Find the bug and fix it.")
    assert result.text == "Changed money.py; `python -m pytest -q -x test_orders.py` passed."
    assert ("locate", "money.py (of orders.py, money.py)") in steps
    assert engine.requests[2].messages[-1]["content"].startswith("Which one of these files has the bug")
    assert all("returned" not in r.messages[-1]["content"] for r in engine.requests)


def test_the_small_profile_leaves_the_oracle_off_and_the_which_file_question_as_it_was(proj, make):
    (proj / "money.py").write_text(MONEY)
    (proj / "orders.py").write_text(ORDERS)
    (proj / "test_orders.py").write_text(ORDER_TESTS)
    fixed = MONEY.replace("int(frac)", "int(frac.ljust(2, '0'))")
    agent, engine, steps = make(proj, [{"text": "money.py"}, {"text": f"```python\n{fixed}```"}])
    assert agent.profile.oracle is False
    result = agent.run("test_orders.py fails. Find the bug and fix it.")
    assert result.text == "Changed money.py; `python -m pytest -q -x test_orders.py` passed."
    assert [s for s, _ in steps] == ["localize", "reproduce", "locate", "edit", "check", "answer"]
    assert engine.requests[0].messages[-1]["content"].startswith("Which one of these files has the bug")
    assert choose_profile(None, {"name": "small", "oracle": True}).oracle is True  # settings turn it on
    with pytest.raises(ProfileError, match="oracle must be true or false"):
        choose_profile(None, {"name": "small", "oracle": "yes"})
