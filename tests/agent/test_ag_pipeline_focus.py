"""Focused repair: the failing test found in pytest's output, the definition it reaches, and a round that rewrites
only that definition of the nearest miss. Real files, real pytest runs, the scripted engine."""
import subprocess
import sys

from pathlib import Path

import pytest

from agent.pipeline.focus import failing_test, implicated
from agent.pipeline.windows import stub_head

STUB = '''"""Stock levels."""


class Inventory:
    def __init__(self):
        self.levels = {}

    def add(self, sku, qty):
        """Put qty more of sku in stock."""
        raise NotImplementedError

    def remove(self, sku, qty):
        """Take qty of sku out; a SKU that reaches 0 is forgotten."""
        raise NotImplementedError

    def count(self, sku):
        """How many of sku are in stock."""
        raise NotImplementedError
'''
ADD = "        self.levels[sku] = self.levels.get(sku, 0) + qty\n"
REMOVE_MISS = "        self.levels[sku] -= qty\n"
REMOVE_RIGHT = "        self.levels[sku] -= qty\n        if not self.levels[sku]:\n            del self.levels[sku]\n"
COUNT = "        return self.levels.get(sku, 0)\n"
TESTS = '''import unittest

from inventory import Inventory


class InventoryTest(unittest.TestCase):
    def setUp(self):
        self.inv = Inventory()
        self.inv.add("nut", 3)

    def test_add(self):
        self.inv.add("nut", 2)
        self.assertEqual(self.inv.count("nut"), 5)

    def test_unknown_counts_zero(self):
        self.assertEqual(self.inv.count("bolt"), 0)

    def test_remove_to_zero_forgets(self):
        self.inv.remove("nut", 3)
        self.assertNotIn("nut", self.inv.levels)
'''
REQUEST = "The methods of Inventory in inventory.py are stubs. Implement them so the tests in test_inventory.py pass."


def implemented(add=ADD, remove=REMOVE_MISS, count=COUNT):
    bodies = iter([add, remove, count])
    return "".join(next(bodies) if line == "        raise NotImplementedError\n" else line
                   for line in STUB.splitlines(keepends=True))


def pytest_output(proj):
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "test_inventory.py"], cwd=proj,
                          capture_output=True, text=True).stdout


@pytest.fixture
def proj(pipeline_proj):
    (pipeline_proj / "inventory.py").write_text(STUB)
    (pipeline_proj / "test_inventory.py").write_text(TESTS)
    return pipeline_proj


def test_the_failing_test_is_found_with_its_setup_and_error(proj):
    (proj / "inventory.py").write_text(implemented())
    test = failing_test(pytest_output(proj), proj)
    assert (test.file, test.name) == ("test_inventory.py", "test_remove_to_zero_forgets")
    assert test.source.startswith("class InventoryTest(unittest.TestCase):\n    def setUp(self):")
    assert test.source.rstrip().endswith('self.assertNotIn("nut", self.inv.levels)')
    assert "test_add" not in test.source
    assert test.error.startswith("AssertionError: 'nut' unexpectedly found in {'nut': 0}")
    assert failing_test("1 passed in 0.01s", proj) is None
    assert failing_test("FAILED test_gone.py::test_x - boom", proj) is None


def test_the_definition_is_the_one_the_test_names_then_the_traceback_then_the_last_call(proj):
    base = implemented()
    (proj / "inventory.py").write_text(base)
    out = pytest_output(proj)
    found = implicated(base, "inventory.py", out, failing_test(out, proj))
    assert found.name == "Inventory.remove"
    assert found.head == '    def remove(self, sku, qty):\n        """Take qty of sku out; a SKU that reaches 0 is forgotten."""\n'
    assert base.splitlines()[found.window[1] - 1] == REMOVE_MISS.rstrip("\n")
    # An error raised inside the code: the innermost definition its traceback passes through.
    (proj / "inventory.py").write_text(implemented(add="        self.levels[sku] += qty\n"))
    out = pytest_output(proj)
    test = failing_test(out, proj)
    assert test.name == "test_add" and "KeyError" in test.error  # setUp's add fails first
    assert implicated(implemented(add="        self.levels[sku] += qty\n"), "inventory.py", out, test).name == \
        "Inventory.add"
    # A test whose name names nothing: the last definition its code calls.
    renamed = TESTS.replace("test_remove_to_zero_forgets", "test_gone_at_zero")
    (proj / "test_inventory.py").write_text(renamed)
    (proj / "inventory.py").write_text(base)
    out = pytest_output(proj)
    assert implicated(base, "inventory.py", out, failing_test(out, proj)).name == "Inventory.remove"


def test_a_near_miss_gets_only_the_failing_definition_rewritten(proj, pipeline_agent):
    miss = implemented()
    worse = implemented(remove="        pass\n")
    agent, engine, steps = pipeline_agent(proj, [
        {"candidates": [miss + "```", worse + "```"]},  # round 1: two tests of three at best
        {"candidates": ["        self.levels[sku] = 0\n```",  # still two tests of three
                        REMOVE_RIGHT + "```"]}], tries=2, focus=True)
    result = agent.run(REQUEST)
    assert result.text == "Changed inventory.py; `python -m pytest -q -x test_inventory.py` passed."
    assert (proj / "inventory.py").read_text() == implemented(remove=REMOVE_RIGHT)
    assert ("edit", "inventory.py (Inventory.remove, focused on test_remove_to_zero_forgets)") in steps
    assert ("tries", "2 candidates, 1 passed, applied #2") in steps
    focused = engine.requests[1]
    assert focused.reply_prefix == "```python\n" + implicated(miss, "inventory.py", "", failing_test(
        "FAILED test_inventory.py::InventoryTest::test_remove_to_zero_forgets", proj)).head
    note = focused.messages[-1]["content"]
    assert note.startswith("inventory.py now reads:\n```python\n" + miss.rstrip())
    assert "def test_remove_to_zero_forgets" in note and "'nut' unexpectedly found" in note
    assert note.endswith("Write the method Inventory.remove again so that this test passes, as one ```python code "
                         "block with only that method. Reply with the code block only.")
    assert not any("self.levels[sku] -= qty" in str(m.get("content")) for m in focused.messages[:-1])  # clean prefix


def test_a_focused_round_that_passes_no_more_tests_changes_nothing_and_repairs_resume(proj, pipeline_agent):
    miss, head = implemented(), stub_head(STUB, REQUEST, Path("inventory.py"))
    agent, engine, steps = pipeline_agent(proj, [
        {"candidates": [miss + "```", implemented(remove="        pass\n") + "```"]},
        {"candidates": ["        pass\n```", "        return\n```"]},  # focused: neither passes more than the miss
        {"candidates": [implemented(remove=REMOVE_RIGHT)[len(head):] + "```", "x```"]}], tries=2, focus=True)
    result = agent.run(REQUEST)
    assert result.text.startswith("Changed inventory.py")
    assert (proj / "inventory.py").read_text() == implemented(remove=REMOVE_RIGHT)
    assert ("tries", "2 candidates, 0 passed, none passed more than 2 tests") in steps
    assert [s for s, _ in steps].count("retry") == 1  # the whole-file repair round followed
    repair = engine.requests[2].messages
    assert "inventory.py now reads" not in repair[-1]["content"] and "now reads" not in str(repair[:-1])


def test_a_miss_that_fails_as_many_tests_as_it_passes_gets_no_focused_round(proj, pipeline_agent):
    (proj / "test_inventory.py").write_text(TESTS + '''
    def test_remove_too_many(self):
        with self.assertRaises(ValueError):
            self.inv.remove("nut", 4)
''')
    head = stub_head(STUB, REQUEST, Path("inventory.py"))
    right = "        if qty > self.levels.get(sku, 0):\n            raise ValueError(sku)\n" + REMOVE_RIGHT
    agent, engine, steps = pipeline_agent(proj, [
        {"candidates": [implemented() + "```"]},  # two tests passed, two failed
        {"candidates": [implemented(remove=right)[len(head):] + "```"]}], tries=1, focus=True)
    agent.driver.config.tries = 2  # sampled rounds, one candidate scripted each
    result = agent.run(REQUEST)
    assert result.text.startswith("Changed inventory.py")
    assert not any("focused" in detail for _, detail in steps)
    assert "now reads" not in engine.requests[1].messages[-1]["content"]


def test_a_focused_round_says_the_failed_equality_in_one_sentence(proj, pipeline_agent):
    miss = implemented(remove=REMOVE_RIGHT, count="        return self.levels.get(sku)\n")
    agent, engine, steps = pipeline_agent(proj, [
        {"candidates": [miss + "```", implemented(remove="        pass\n", count="        return 0\n") + "```"]},
        {"candidates": [COUNT + "```", "        return 1\n```"]}], tries=2, focus=True)
    result = agent.run(REQUEST)
    assert result.text.startswith("Changed inventory.py")
    assert ("edit", "inventory.py (Inventory.count, focused on test_unknown_counts_zero)") in steps
    note = engine.requests[1].messages[-1]["content"]
    assert "AssertionError: None != 0\nIn short: `self.inv.count(\"bolt\")` returns None, but the test expects 0." \
        in note
