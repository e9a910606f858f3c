"""What the pipeline finds before a fix without the model: ruff's bug patterns in the file, and the calls a failing
test makes into the project (a real pytest run under the plugin). Real files, real subprocesses, scripted engine."""
import sys
from pathlib import Path

import pytest

from agent.core import events as ev
from agent.core.loop import Agent, LoopConfig
from agent.core.permissions import Permissions
from agent.core.profile import choose_profile
from agent.core.transcript import Session
from agent.engines.scripted import ScriptedEngine
from agent.pipeline import call_trace, call_trace_plugin
from agent.pipeline.call_trace import format_trace, trace_failing_test, traced_command
from agent.pipeline.driver import PipelineDriver
from agent.pipeline.lint import bug_findings
from hooks.settings import PermissionSettings, SourcedRule
from tools import builtin_tools
from tools.base import ToolContext

STOCK = ('def parse_stock(lines, stock={}):\n    for line in lines:\n        item, qty = line.split(",")\n'
         '        stock[item] = stock.get(item, 0) + int(qty)\n    return stock\n')
STOCK_TESTS = ('from stock import parse_stock\n\n\ndef test_first():\n    assert parse_stock(["a,1"]) == {"a": 1}\n\n\n'
               'def test_second_call_starts_empty():\n    parse_stock(["a,1"])\n    assert parse_stock(["b,2"]) == {"b": 2}\n')
FIXED = STOCK.replace("stock={}):\n", "stock=None):\n    stock = {} if stock is None else stock\n")
MONEY = 'def cents(text):\n    whole, frac = text.split(".")\n    return int(whole) * 100 + int(frac)\n'
ORDERS = "from money import cents\n\n\ndef total(prices):\n    return sum(cents(p) for p in prices)\n"
ORDER_TESTS = ('from orders import total\n\n\ndef test_two_places():\n    assert total(["1.25"]) == 125\n\n\n'
               'def test_one_place():\n    assert total(["4.5", "1.25"]) == 575\n')


@pytest.fixture
def proj(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_DATA_DIR", str(tmp_path / "data"))
    p = tmp_path / "proj"
    p.mkdir()
    return p


def make(proj, turns):
    engine = ScriptedEngine(turns)
    settings = PermissionSettings(allow=[SourcedRule("Bash", "test")])
    agent = Agent(engine, builtin_tools(), Session.create(proj), ToolContext(cwd=proj, read_window=200),
                  system_prompt="s", permissions=Permissions(settings, "acceptEdits", proj),
                  profile=choose_profile(None, "small"), config=LoopConfig(max_turns=8))
    agent.driver = PipelineDriver(proj)
    steps = []
    agent.bus.subscribe(lambda e: steps.append((e.step, e.detail)) if isinstance(e, ev.PipelineStep) else None)
    return agent, engine, steps


def test_ruff_bug_patterns_become_sentences_and_style_or_syntax_does_not():
    found = bug_findings(STOCK, Path("stock.py"), "stock.py")
    assert found == ["stock.py line 1: Do not use mutable data structures for argument defaults "
                     "(`def parse_stock(lines, stock={}):`); fix: Replace with `None`; initialize within function"]
    assert bug_findings("def f(x):\n    x == 1\n    return x\n", Path("f.py"), "f.py")[0].startswith(
        "f.py line 2: Pointless comparison")
    assert bug_findings("import os\nfor line in []:\n    line = line.strip()\n", Path("ok.py"), "ok.py") == []
    assert bug_findings("def f(:\n", Path("bad.py"), "bad.py") == []  # the parse guard's business
    assert bug_findings('{"a": []}\n', Path("c.json"), "c.json") == [] and bug_findings(None, Path("n.py"), "n") == []


def test_a_reported_failure_leads_the_edit_note_with_the_linters_finding(proj):
    (proj / "stock.py").write_text(STOCK)
    (proj / "test_stock.py").write_text(STOCK_TESTS)
    agent, engine, steps = make(proj, [{"text": f"```python\n{FIXED}```"}])
    result = agent.run("test_stock.py fails. Fix the bug in stock.py.")
    assert result.text == "Changed stock.py; `python -m pytest -q -x test_stock.py` passed."
    note = engine.requests[0].messages[-1]["content"]
    assert note.startswith("The harness traced the failing test test_stock.py::test_second_call_starts_empty")
    assert "\nThe harness found: stock.py line 1: Do not use mutable data structures" in note
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
    assert trace.splitlines() == [
        "The harness traced the failing test test_orders.py::test_one_place: the calls it made into the project's "
        "functions (callees indented) and what each returned:",
        "total(['4.5', '1.25']) returned 530", "  cents('4.5') returned 405", "  cents('1.25') returned 125"]
    (proj / "money.py").write_text(MONEY.replace("int(frac)", "int(frac.ljust(2, '0'))"))
    assert trace_failing_test("python -m pytest -q -x test_orders.py", proj, {"PATH": "/usr/bin:/bin"}) == ""


def test_only_a_plain_pytest_run_is_traced_and_a_broken_record_is_no_trace():
    assert traced_command("python -m pytest -q -x test_a.py") == f"{sys.executable} -m pytest -q -x test_a.py " \
                                                                 "-p agent.pipeline.call_trace_plugin"
    assert traced_command("python main.py") is None and traced_command("python -m pytest x; rm -rf /") is None
    assert format_trace({"test": "t", "calls": [{"name": "f"}]}) == "" and format_trace({"calls": "x"}) == ""
    deep = {"test": "t", "calls": [{"name": "f", "args": str(i), "depth": 9, "returned": None} for i in range(20)]}
    lines = format_trace(deep).splitlines()[1:]
    assert len(lines) == call_trace.MAX_LINES + 1 and lines[0] == "        f(0) did not return" and lines[-1] == "..."
    assert (call_trace.ON_VAR, call_trace.MARK) == (call_trace_plugin.ON_VAR, call_trace_plugin.MARK)


def test_the_trace_is_shown_once_with_the_question_of_which_file_holds_the_bug(proj):
    (proj / "money.py").write_text(MONEY)
    (proj / "orders.py").write_text(ORDERS)
    (proj / "test_orders.py").write_text(ORDER_TESTS)
    fixed = MONEY.replace("int(frac)", "int(frac.ljust(2, '0'))")
    agent, engine, steps = make(proj, [{"text": "money.py"}, {"text": f"```python\n{fixed}```"}])
    result = agent.run("test_orders.py fails. Find the bug and fix it.")
    assert result.text == "Changed money.py; `python -m pytest -q -x test_orders.py` passed."
    assert [s for s, _ in steps] == ["localize", "reproduce", "trace", "locate", "edit", "check", "answer"]
    asked = engine.requests[0].messages[-1]["content"]
    assert "  cents('4.5') returned 405\n  cents('1.25') returned 125\nWhich one of these files" in asked
    assert "returned 405" not in engine.requests[1].messages[-1]["content"]
