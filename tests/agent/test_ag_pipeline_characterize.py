"""A test the request adds whose only miss is the value it expects takes the value the run gives; a test the file had
before is never changed, and a request that adds no test or reports a bug gets no such correction (real pytest
runs, the scripted engine)."""
import subprocess
import sys

from agent.pipeline.characterize import DROPPED, corrected, dropped, split_conjunctions

CART = ("class Cart:\n    def __init__(self):\n        self.items = []\n\n    def add(self, name):\n"
        "        self.items.append(name)\n\n    def remove(self, name):\n"
        "        self.items = [i for i in self.items if i != name]\n")
TESTS = "from cart import Cart\n\n\ndef test_add():\n    c = Cart()\n    c.add('a')\n    assert c.items == ['a']\n"
NEW = ("def test_remove():\n    c = Cart()\n    c.add('a')\n    c.add('b')\n    c.remove('a')\n"
       "    assert len(c.items) == 2\n    assert c.items == ['a']\n")
ADD = "Add a test for Cart.remove to test_cart.py."


def _pytest(proj):
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "test_cart.py"], cwd=proj,
                          capture_output=True, text=True).stdout


def test_the_new_tests_expected_literal_takes_the_value_the_run_shows(tmp_path):
    (tmp_path / "cart.py").write_text(CART)
    source = TESTS + "\n\n" + NEW
    (tmp_path / "test_cart.py").write_text(source)
    fixed, line, value = corrected(_pytest(tmp_path), source, TESTS, "test_cart.py")
    assert (line, value) == (15, "1") and fixed == source.replace("len(c.items) == 2", "len(c.items) == 1")
    # The test the file had before judges: its failure is never "corrected".
    (tmp_path / "cart.py").write_text(CART.replace("self.items.append(name)", "self.items.append(name * 2)"))
    assert corrected(_pytest(tmp_path), source, TESTS, "test_cart.py") is None
    assert corrected(_pytest(tmp_path), source, None, "test_cart.py")[1:] == (7, "['aa']")  # new file: all new


def test_an_added_test_with_wrong_expected_values_passes_with_the_values_the_code_gives(pipeline_proj, pipeline_agent):
    (pipeline_proj / "cart.py").write_text(CART)
    (pipeline_proj / "test_cart.py").write_text(TESTS)
    agent, engine, steps = pipeline_agent(pipeline_proj, [{"text": f"```python\n{NEW}```"}])
    result = agent.run(ADD)
    assert result.text == ("Changed test_cart.py (line 15 expects 1; line 16 expects ['b'], the values the code "
                           "gives); `python -m pytest -q -x test_cart.py` passed.")
    assert (pipeline_proj / "test_cart.py").read_text() == TESTS + "\n\n" + NEW.replace("== 2", "== 1").replace(
        "== ['a']", "== ['b']")
    assert ("expected", "test_cart.py: line 15 expects 1, line 16 expects ['b'], the values the run gave") in steps
    assert (pipeline_proj / "cart.py").read_text() == CART


def test_a_request_that_adds_no_test_gets_no_expected_values_from_the_run(pipeline_proj, pipeline_agent):
    (pipeline_proj / "cart.py").write_text(CART)
    (pipeline_proj / "test_cart.py").write_text(TESTS + "\n\n" + NEW)
    agent, engine, steps = pipeline_agent(pipeline_proj, [{"text": f"```python\n{TESTS}```"}] * 3)
    agent.run("test_cart.py fails. Fix test_cart.py.")
    assert "expected" not in [s for s, _ in steps]
    (pipeline_proj / "test_cart.py").write_text(TESTS)
    agent, engine, steps = pipeline_agent(pipeline_proj, [{"text": f"```python\n{NEW}```"}] * 3)
    result = agent.run("Cart.remove is broken. Add a test that shows the bug to test_cart.py.")
    assert "expected" not in [s for s, _ in steps] and result.text.startswith("test_cart.py: not changed")


CONJOINED = ("def test_remove_only():\n    c = Cart()\n    c.add('a')\n    c.remove('a')\n"
             "    assert len(c.items) == 1 and c.items[0] == 'a'\n")


def test_an_and_of_checks_is_split_and_a_check_left_without_its_value_is_dropped(tmp_path):
    split = split_conjunctions(TESTS + "\n\n" + CONJOINED, TESTS)
    assert split == TESTS + "\n\n" + CONJOINED.replace(" and ", "\n    assert ")
    assert split_conjunctions(TESTS + "\n\n" + CONJOINED, TESTS + "\n\n" + CONJOINED) == TESTS + "\n\n" + CONJOINED
    (tmp_path / "cart.py").write_text(CART)
    emptied = split.replace("len(c.items) == 1", "len(c.items) == 0")
    (tmp_path / "test_cart.py").write_text(emptied)
    out = _pytest(tmp_path)
    assert "IndexError" in out
    assert dropped(out, emptied, TESTS, "test_cart.py") == (emptied.replace("    assert c.items[0] == 'a'\n", ""), 15,
                                                             DROPPED)
    assert dropped(out, emptied, emptied, "test_cart.py") is None  # a test the file had judges
    only = emptied.replace("    assert len(c.items) == 0\n", "")  # its only check: never dropped
    (tmp_path / "test_cart.py").write_text(only)
    assert dropped(_pytest(tmp_path), only, TESTS, "test_cart.py") is None


def test_an_added_test_with_an_and_of_wrong_beliefs_keeps_what_the_code_does(pipeline_proj, pipeline_agent):
    (pipeline_proj / "cart.py").write_text(CART)
    (pipeline_proj / "test_cart.py").write_text(TESTS)
    agent, _, steps = pipeline_agent(pipeline_proj, [{"text": f"```python\n{CONJOINED}```"}])
    result = agent.run(ADD)
    assert result.text.startswith("Changed test_cart.py (line 14 expects 0; line 15's check dropped"), steps
    assert (pipeline_proj / "test_cart.py").read_text() == TESTS + "\n\n" + CONJOINED.replace(
        "len(c.items) == 1 and c.items[0] == 'a'", "len(c.items) == 0")
    # the test still catches a remove that does nothing
    (pipeline_proj / "cart.py").write_text(CART.replace("self.items = [i for i in self.items if i != name]", "pass"))
    assert "1 failed" in _pytest(pipeline_proj)
