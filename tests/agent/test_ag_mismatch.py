"""A failing equality assertion in one sentence (agent/pipeline/mismatch.py), read from real pytest reports."""
import subprocess
import sys

from agent.pipeline.mismatch import assertion_mismatch


def report(tmp_path, test_source: str) -> str:
    (tmp_path / "slug.py").write_text("def slugify(t):\n    return '-'.join(t.split())\n")
    (tmp_path / "test_it.py").write_text(test_source)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "test_it.py"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stdout
    return r.stdout


def test_a_pytest_assert_names_the_expression_its_value_and_the_expected_one(tmp_path):
    out = report(tmp_path, 'from slug import slugify\n\n\ndef test_simple():\n'
                           '    assert slugify("Hello World") == "hello-world"\n')
    assert assertion_mismatch(out) == \
        ("In short: `slugify(\"Hello World\")` returns 'Hello-World', but the test expects 'hello-world'. "
         "The two differ only in upper and lower case.")


def test_unittest_assert_equal_either_way_round(tmp_path):
    out = report(tmp_path, "import unittest\nfrom slug import slugify\n\n\nclass T(unittest.TestCase):\n"
                           "    def test_it(self):\n        self.assertEqual(len(slugify('a b')), 4)\n")
    assert assertion_mismatch(out) == "In short: `len(slugify('a b'))` returns 3, but the test expects 4."
    out = report(tmp_path, "import unittest\nfrom slug import slugify\n\n\nclass T(unittest.TestCase):\n"
                           "    def test_it(self):\n        self.assertEqual(['a', 'b'], slugify('a b').split('+'))\n")
    assert assertion_mismatch(out) == \
        ("In short: `slugify('a b').split('+')` returns ['a-b'], but the test expects ['a', 'b']. "
         "The result lacks 'a' and 'b', and has 'a-b', which the test does not expect.")


def test_nothing_when_the_failure_is_not_an_equality_of_shown_values(tmp_path):
    other = report(tmp_path, "from slug import slugify\n\n\ndef test_it():\n    assert len(slugify('a b')) > 5\n")
    both_computed = report(tmp_path, "from slug import slugify\n\n\ndef test_it():\n"
                                     "    assert slugify('a b') == slugify('a  b').upper()\n")
    crash = report(tmp_path, "from slug import slugify\n\n\ndef test_it():\n    assert slugify(3) == '3'\n")
    assert [assertion_mismatch(o) for o in (other, both_computed, crash, "")] == ["", "", "", ""]


def test_where_texts_differ_line_endings_leading_spaces_a_line(tmp_path):
    crlf = report(tmp_path, "from slug import slugify\n\n\ndef test_it():\n"
                            "    assert '\\r\\n'.join(slugify('a b').split('-')) + '\\r\\n' == 'a\\nb\\n'\n")
    assert assertion_mismatch(crlf).endswith("The result ends its lines with '\\r\\n'; the test expects '\\n'.")
    indent = report(tmp_path, "from slug import slugify\n\n\ndef test_it():\n"
                              "    assert slugify('a b').replace('-', '\\n') == 'a\\n  b'\n")
    assert assertion_mismatch(indent).endswith(
        "Line 2 of the result is 'b'; the test expects '  b' (the test's line starts with 2 spaces, the result's with 0).")
    lines = report(tmp_path, "from slug import slugify\n\n\ndef test_it():\n"
                             "    assert slugify('a b').replace('-', '\\n') == 'a\\nb\\nc'\n")
    assert assertion_mismatch(lines).endswith("The result has 2 lines; the test expects 3.")


def test_where_lists_differ_and_nothing_said_of_values_unittest_cut(tmp_path):
    order = report(tmp_path, "import unittest\nfrom slug import slugify\n\n\nclass T(unittest.TestCase):\n"
                             "    def test_it(self):\n        self.assertEqual(slugify('b a').split('-'), ['a', 'b'])\n")
    assert assertion_mismatch(order).endswith("The result has the right items in the wrong order.")
    long = "x " * 60
    cut = report(tmp_path, "import unittest\nfrom slug import slugify\n\n\nclass T(unittest.TestCase):\n"
                           f"    def test_it(self):\n        self.assertEqual(slugify('{long}'), '{long}')\n")
    assert "[" in cut and "chars]" in cut  # unittest shortened the values: no sentence is made of them
    assert assertion_mismatch(cut) == ""
