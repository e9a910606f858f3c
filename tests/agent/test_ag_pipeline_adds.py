"""Additions and crash reports the harness shapes: a new method lands at the end of its class (the model writes only
the method), a command the request quotes names the module it runs and is the check (an error line in place of the
crash is not a fix), and a looping candidate is dropped. Real files and subprocesses, scripted engine."""
import subprocess
from pathlib import Path

import pytest

from agent.pipeline import members
from agent.pipeline.checks import check_commands, swallowed_crash
from agent.pipeline.localize import localize
from agent.pipeline.quoted_runs import quoted_commands

CART = '''"""A cart."""
from dataclasses import dataclass, field


@dataclass
class Cart:
    items: list = field(default_factory=list)

    def add(self, name, qty=1):
        self.items.append((name, qty))


def empty():
    return Cart()
'''
CART_TESTS = "from shop.cart import Cart\n\n\ndef test_add():\n    c = Cart()\n    c.add('a')\n    assert c.items\n"
REPORT = '''import sys


def main(argv):
    for arg in argv:
        name, qty = arg.split(":")
        print(name, int(qty))


if __name__ == "__main__":
    main(sys.argv[1:])
'''


@pytest.fixture
def proj(pipeline_proj):
    (pipeline_proj / "shop").mkdir()
    (pipeline_proj / "shop" / "__init__.py").write_text("")
    (pipeline_proj / "shop" / "cart.py").write_text(CART)
    (pipeline_proj / "shop" / "report.py").write_text(REPORT)
    (pipeline_proj / "tests").mkdir()
    (pipeline_proj / "tests" / "test_cart.py").write_text(CART_TESTS)
    return pipeline_proj


def test_which_class_a_request_adds_a_method_to():
    assert members.target_class("Add a method count() to Cart that sums the quantities.", CART) == "Cart"
    assert members.target_class("Add a `count` method that sums the quantities.", CART) == "Cart"  # the only class
    assert members.target_class("Add a method add() to Cart.", CART) == ""  # it exists: a change, not an addition
    assert members.target_class("Fix the add method of Cart.", CART) == ""
    assert members.target_class("Add a function count() to cart.py.", CART) == ""  # top level: appended
    two = CART + "\n\nclass Shelf:\n    pass\n"
    assert members.target_class("Add a method count().", two) == ""  # which class is not said
    assert members.target_class("Give Shelf a method count().", two) == "Shelf"


def test_a_method_is_put_at_the_end_of_its_class_body():
    method = "def count(self):\n    return sum(q for _, q in self.items)\n"
    out = members.inserted(CART, "Cart", method)
    assert out == CART.replace("        self.items.append((name, qty))\n",
                               "        self.items.append((name, qty))\n\n"
                               "    def count(self):\n        return sum(q for _, q in self.items)\n")
    # An import it needs joins the file's; the class written again keeps only what it adds; the whole file is the file.
    out = members.inserted(CART, "Cart", "import math\n\n    def root(self):\n        return math.sqrt(len(self.items))\n")
    assert out.splitlines()[1:3] == ["from dataclasses import dataclass, field", "import math"]
    assert "\n    def root(self):\n        return math.sqrt(len(self.items))\n\n\ndef empty():" in out
    again = "class Cart:\n    def add(self, name, qty=1):\n        pass\n\n    def count(self):\n        return 0\n"
    assert members.inserted(CART, "Cart", again) == members.inserted(CART, "Cart", "def count(self):\n    return 0\n")
    whole = CART + "\n\ndef extra():\n    return 1\n"
    assert members.inserted(CART, "Cart", whole) == whole


def test_add_a_method_writes_only_the_method(proj, pipeline_agent):
    agent, engine, steps = pipeline_agent(proj, [{"text": "    def count(self):\n"
                                                          "        return sum(q for _, q in self.items)\n```"}])
    result = agent.run("Add a method count() to Cart in shop/cart.py that returns the sum of the quantities.")
    assert "Write only the new method of class Cart" in engine.requests[0].messages[-1]["content"]
    assert ("edit", "shop/cart.py (addition)") in steps
    text = (proj / "shop" / "cart.py").read_text()
    assert "        self.items.append((name, qty))\n\n    def count(self):\n" in text and text.endswith(
        "\n\n\ndef empty():\n    return Cart()\n")
    assert result.text == "Changed shop/cart.py; `python -m pytest -q -x tests/test_cart.py` passed."


def test_a_quoted_command_names_its_module_and_is_the_first_check(proj):
    request = "Running `python -m shop.report apple` crashes. Make the quantity default to 1."
    loc = localize(proj, request)
    assert loc.named == [(proj / "shop" / "report.py").resolve()] and "shop.report" not in loc.missing
    assert quoted_commands(proj, request) == ["python -m shop.report apple"]
    assert check_commands(proj, request, loc, loc.named)[0] == "python -m shop.report apple"
    # Only commands that run the project's own code, one program each.
    assert quoted_commands(proj, "`python -m http.server` and `python nothere.py` and `python -m shop.report | wc`") == []
    assert quoted_commands(proj, "`pytest -q tests` fails") == ["pytest -q tests"]


def test_an_error_line_in_place_of_a_crash_is_not_a_fix():
    failing, out = "python -m shop.report apple", "Error: invalid argument format\n[exit code 0]"
    assert swallowed_crash(failing, out, failing, "`python -m shop.report apple` crashes. Default the qty to 1.")
    assert not swallowed_crash(failing, "apple 1\n", failing, "`python -m shop.report apple` crashes.")
    assert not swallowed_crash(failing, out, failing, "It crashes; print an error message for a bad argument.")
    assert not swallowed_crash(failing, out, "", "crashes")  # it did not fail before the edit


def test_a_crash_the_request_quotes_is_reproduced_and_a_refusal_is_not_kept(proj, pipeline_agent):
    refuse = REPORT.replace('        name, qty = arg.split(":")\n',
                            '        if ":" not in arg:\n            print("Error: invalid argument")\n'
                            '            return\n        name, qty = arg.split(":")\n')
    right = REPORT.replace('        name, qty = arg.split(":")\n',
                           '        name, _, qty = arg.partition(":")\n        qty = qty or "1"\n')
    agent, engine, steps = pipeline_agent(proj, [{"candidates": [refuse + "```", right + "```"]}], tries=2)
    result = agent.run("Running `python -m shop.report apple` crashes. Make the quantity default to 1.")
    assert ("reproduce", "python -m shop.report apple") in steps
    assert ("tries", "2 candidates, 1 passed, applied #2") in steps
    assert (proj / "shop" / "report.py").read_text() == right
    assert result.text == "Changed shop/report.py; `python -m shop.report apple` passed."
    out = subprocess.run(["python", "-m", "shop.report", "apple"], cwd=proj, capture_output=True, text=True)
    assert out.stdout == "apple 1\n"


def test_a_looping_candidate_is_dropped_like_one_cut_off(proj, pipeline_agent):
    right = REPORT.replace('        name, qty = arg.split(":")\n',
                           '        name, _, qty = arg.partition(":")\n        qty = qty or "1"\n')
    agent, engine, steps = pipeline_agent(proj, [{"candidates": [
        {"text": REPORT + "        print()\n" * 30, "finish_reason": "runaway"}, right + "```"]}], tries=2)
    agent.run("Running `python -m shop.report apple` crashes. Make the quantity default to 1.")
    assert ("tries", "2 candidates, 1 passed, applied #2") in steps
    assert (proj / "shop" / "report.py").read_text() == right


def test_a_test_file_must_gain_a_collected_test():
    from agent.pipeline.checks import adds_no_test
    path, request = Path("tests/test_cart.py"), "Add a test for Cart.remove to tests/test_cart.py."
    copied = CART_TESTS + "\n\n    def remove(self, name):\n        pass\n"
    nested = CART_TESTS + "\n\n    def test_remove(self):\n        assert True\n"  # inside the last test: not collected
    assert adds_no_test(request, path, CART_TESTS, copied) and adds_no_test(request, path, CART_TESTS, nested)
    assert not adds_no_test(request, path, CART_TESTS, CART_TESTS + "\n\ndef test_remove():\n    assert True\n")
    method = "import unittest\n\n\nclass T(unittest.TestCase):\n    def test_a(self):\n        pass\n"
    assert not adds_no_test(request, path, method, method + "\n    def test_b(self):\n        pass\n")
    assert not adds_no_test("Fix the test in tests/test_cart.py.", path, CART_TESTS, copied)  # not an addition
    assert not adds_no_test(request, Path("shop/cart.py"), CART, CART)


def test_an_appended_test_loses_a_self_it_never_uses():
    from agent.pipeline.windows import appended
    out = appended(CART_TESTS, "    def test_remove(self):\n        c = Cart()\n        assert c.items == []\n")
    assert out.endswith("\n\n\ndef test_remove():\n    c = Cart()\n    assert c.items == []\n")
    kept = appended(CART_TESTS, "def test_uses(self):\n    self.assertTrue(1)\n")  # it uses self: left as written
    assert kept.endswith("def test_uses(self):\n    self.assertTrue(1)\n")


def test_add_a_test_refuses_a_candidate_that_adds_none(proj, pipeline_agent):
    copy = "    def remove(self, name):\n        pass\n```"
    test = "def test_add_twice():\n    c = Cart()\n    c.add('a')\n    c.add('a')\n    assert len(c.items) == 2\n```"
    agent, engine, steps = pipeline_agent(proj, [{"candidates": [copy, test]}], tries=2)
    result = agent.run("Add a test for Cart.add to tests/test_cart.py.")
    assert ("tries", "2 candidates, 1 passed, applied #2") in steps
    assert (proj / "tests" / "test_cart.py").read_text().endswith("\n\n\ndef test_add_twice():\n    c = Cart()\n"
                                                                  "    c.add('a')\n    c.add('a')\n"
                                                                  "    assert len(c.items) == 2\n")
    assert result.text.startswith("Changed tests/test_cart.py")


def test_an_edit_that_makes_the_file_import_itself_is_undone(proj, pipeline_agent):
    long_report = REPORT + "".join(f"\n\ndef helper_{i}(x):\n    return x + {i}\n" for i in range(60))
    (proj / "shop" / "report.py").write_text(long_report)  # long, nothing the request names: one Edit call
    def self_import(name):
        return {"tool_calls": [{"name": "Edit", "arguments": {
            "file_path": "shop/report.py", "old_string": "import sys\n",
            "new_string": f"import sys\nfrom shop.report import {name}\n"}}]}
    agent, engine, steps = pipeline_agent(proj, [self_import("main"), self_import("helper_1"), self_import("helper_2")])
    result = agent.run("Add docstrings to shop/report.py.")
    assert (proj / "shop" / "report.py").read_text() == long_report
    assert "report.py imports from itself (shop.report)" in result.text


def test_a_dotted_method_name_is_code_not_a_file_to_make(proj):
    from agent.pipeline.route import plan_request
    request = "Make Cart.add raise a ValueError when qty is below 1."
    loc = localize(proj, request)
    assert loc.missing == [] and loc.terms[:2] == ["Cart", "add"]
    plan = plan_request(request, loc, proj, offered={"Read", "Write", "Edit", "Bash"})
    assert plan.targets == [(proj / "shop" / "cart.py").resolve()]
    # A name nothing defines is still a file the request may make.
    made = localize(proj, "Make notes.total listing the totals.")
    assert made.missing == ["notes.total"]


def test_a_question_that_names_nothing_is_answered_from_the_files_its_words_occur_in(proj):
    from agent.pipeline.route import plan_request
    (proj / "shop" / "cart.py").write_text(CART + "\n\ndef discounted(cart, discount):\n    return 1 - discount\n")
    question = "Which function in the project applies the discount?"
    plan = plan_request(question, localize(proj, question), proj, offered={"Read", "Bash"})
    assert (plan.kind, plan.context[:1]) == ("answer", [(proj / "shop" / "cart.py").resolve()])
    none = "Which function in the project sends the newsletter?"  # no word of it occurs: the free loop searches
    assert plan_request(none, localize(proj, none), proj, offered={"Read", "Bash"}).kind == "react"
    edit = "Make the discount friendlier."  # not a question: no guessing targets from plain words
    assert plan_request(edit, localize(proj, edit), proj, offered={"Read", "Edit"}).kind == "react"


def test_a_plain_word_the_request_calls_code_is_searched_and_renamed(proj, pipeline_agent):
    from agent.pipeline.localize import _terms
    assert _terms("Rename the method add to put everywhere.")[:1] == ["add"]
    assert _terms("Rename total to grand_total.") == ["total", "grand_total"]
    assert _terms("Fill in the missing function body; implement the function stub.") == []
    agent, engine, steps = pipeline_agent(proj, [])
    result = agent.run("Rename the method add to put everywhere.")
    assert engine.requests == []  # the harness's rename: no model call
    assert "def put(self, name, qty=1):" in (proj / "shop" / "cart.py").read_text()
    assert "c.put('a')" in (proj / "tests" / "test_cart.py").read_text()
    assert result.text.startswith("Renamed add to put")


def test_a_question_about_a_quoted_command_runs_it_as_written(proj, pipeline_agent):
    from agent.pipeline.quoted_runs import asked_command
    assert asked_command("What does `git log -3 --oneline` show?") == "git log -3 --oneline"
    assert asked_command("Is `total` right?") is None and asked_command("`ls -a` or `ls -l`?") is None
    agent, engine, steps = pipeline_agent(proj, [{"text": "It prints apple 3."}])
    result = agent.run("What does `python -m shop.report apple:3` print?")
    assert ("command", "python -m shop.report apple:3") in steps
    assert result.text == "`python -m shop.report apple:3` printed:\n```\napple 3\n```\nIt prints apple 3."
    assert [r.tool_choice for r in engine.requests] == ["none"]  # only the answer is the model's
    # Unquoted, a `python -m` command still makes it a question for the shell, not for the files.
    from agent.pipeline.route import plan_request
    question = "What total does python -m shop.report apple:3 print?"
    assert plan_request(question, localize(proj, question), proj, offered={"Bash", "Read"}).kind == "shell"


def test_an_unquoted_command_the_request_writes_is_a_check(proj):
    from agent.pipeline.quoted_runs import written_commands
    request = "Add a --limit option, e.g. python -m shop.report apple:1 --limit 1 prints one line."
    assert written_commands(proj, request) == ["python -m shop.report apple:1 --limit 1"]
    loc = localize(proj, request)
    assert check_commands(proj, request, loc, loc.named)[0] == "python -m shop.report apple:1 --limit 1"
    assert written_commands(proj, "Make python -m shop.report apple:2 work.") == ["python -m shop.report apple:2"]
    # A test runner written so is left to the test checks; a quoted command wins over unquoted ones.
    assert written_commands(proj, "python -m pytest tests passes now") == []
    assert written_commands(proj, "`python -m shop.report a:1` and python -m shop.report b:2") == [
        "python -m shop.report a:1"]


def test_an_edit_that_writes_lines_twice_in_a_row_is_undone_and_tried_again(proj, pipeline_agent):
    long_report = REPORT + "".join(f"\n\ndef helper_{i}(x):\n    return x + {i}\n" for i in range(60))
    (proj / "shop" / "report.py").write_text(long_report)  # long, nothing the request names: one Edit call
    body = "def helper_1(x):\n    return x + 1\n"
    doubled = {"tool_calls": [{"name": "Edit", "arguments": {
        "file_path": "shop/report.py", "old_string": body, "new_string": body * 2}}]}
    right = {"tool_calls": [{"name": "Edit", "arguments": {
        "file_path": "shop/report.py", "old_string": body,
        "new_string": body.replace(":\n", ':\n    """x plus one."""\n', 1)}}]}
    agent, engine, steps = pipeline_agent(proj, [doubled, right])
    result = agent.run("Add docstrings to shop/report.py.")
    assert result.text.startswith("Changed shop/report.py")
    assert (proj / "shop" / "report.py").read_text() == long_report.replace(body, body.replace(
        ":\n", ':\n    """x plus one."""\n', 1))
    assert any(step == "retry" and detail.startswith("the edit failed") for step, detail in steps)


def test_lines_written_twice_in_a_row_are_found_unless_the_file_had_them_so():
    from agent.pipeline.checks import doubled_lines
    text = "def f(h):\n    part = 'am' if h < 12 else 'pm'\n    return part\n"
    twice = text + "    part = 'am' if h < 12 else 'pm'\n    return part\n"
    assert doubled_lines(text, twice) == "4-5"
    assert doubled_lines(twice, twice) == "" and doubled_lines(text, text) == ""
    assert doubled_lines("", "{\n  [\n    }\n  ]\n    }\n  ]\n}\n") == ""  # short runs of brackets repeat in real files
