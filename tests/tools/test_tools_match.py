"""tools/_match.py: exact, gutter-stripped and whitespace-insensitive matching of old_string, unique only."""
from __future__ import annotations

import time

import pytest

from tools._match import EditError, Match, Span, find, strip_gutters

METHOD = ("class Calc:\n"
          "    def sub(self, a, b):\n"
          "        x = a - b\n"
          "\n"
          "        return x\n"
          "\n"
          "    def mul(self, a, b):\n"
          "        return a * b\n")


def edited(old: str, new: str, text: str = METHOD, replace_all: bool = False) -> tuple[str, str, str]:
    match = find(text, old, new, replace_all)
    return match.kind, match.note(), match.apply(text)


def error(old: str, new: str = "x", text: str = METHOD, replace_all: bool = False) -> str:
    with pytest.raises(EditError) as e:
        find(text, old, new, replace_all)
    return str(e.value)


def test_exact_match_spans_and_replace_all():
    assert find(METHOD, "a * b", "a*b") == Match("exact", (Span(114, 119, "a*b", 8, 8),))
    assert find(METHOD, "self, a, b", "self, p, q", replace_all=True) == Match("exact", (
        Span(24, 34, "self, p, q", 2, 2), Span(86, 96, "self, p, q", 7, 7)))
    assert error("self, a, b") == ("old_string occurs 2 times (lines 2, 7). Add surrounding lines to old_string to "
                                   "make it unique, or set replace_all to true to change every occurrence.")
    assert error("a * b", "a * b") == "old_string and new_string are identical; there is nothing to change."


def test_gutters_are_stripped_from_old_and_new():
    old = "     7\t    def mul(self, a, b):\n     8\t        return a * b\n"
    new = "     7\t    def mul(self, a, b):\n     8\t        return a * b * 1\n"
    assert edited(old, new) == ("gutter", "matched without Read's line numbers at lines 7-8",
                                METHOD.replace("a * b\n", "a * b * 1\n"))
    # An empty line's gutter may come without its tab; a bare number in new_string between numbered lines is a gutter.
    old = "     3\t        x = a - b\n     4\n     5\t        return x"
    new = "     3\t        x = a - b\n     4\n     5\t        return -x"
    assert edited(old, new)[2] == METHOD.replace("return x", "return -x")
    assert strip_gutters("    12\tfoo\n    14\tbar") is None  # not consecutive: not Read's gutter
    assert strip_gutters("    12\tfoo\nbar") is None  # one line without a gutter
    assert strip_gutters("    12\n    13") is None  # numbers alone are content
    assert error("     8\t        return a * b", "        return a * b") == (
        "Without Read's line-number prefixes, old_string and new_string are identical; there is nothing to change.")


def test_gutter_and_wrong_indentation_together():
    old = "     7\tdef mul(self, a, b):\n     8\treturn a * b"
    assert edited(old, "     7\tdef mul(self, a, b):\n     8\treturn b * a") == (
        "whitespace", "matched without Read's line numbers and ignoring whitespace at lines 7-8",
        METHOD.replace("a * b\n", "b * a\n"))


def test_indentation_off_by_a_constant_is_rebased():
    # old_string written without the class indentation; new_string adds a nested block, rebased the same way.
    old = "def sub(self, a, b):\n    x = a - b\n\n    return x"
    new = "def sub(self, a, b):\n    x = a - b\n    if x < 0:\n        x = -x\n\n    return x"
    assert edited(old, new) == ("whitespace", "matched ignoring whitespace at lines 2-5", METHOD.replace(
        "        x = a - b\n", "        x = a - b\n        if x < 0:\n            x = -x\n"))
    # Over-indented old_string (tabs), new_string dedented alike.
    old = "\t\t\tx = a - b\n\n\t\t\treturn x\n"
    new = "\t\t\tx = a - b\n\n\t\t\treturn abs(x)\n"
    assert edited(old, new)[2] == METHOD.replace("return x", "return abs(x)")


def test_flattened_indentation_takes_each_lines_own_offset():
    old = "def sub(self, a, b):\nx = a - b\n\nreturn x"
    new = "def sub(self, a, b):\ny = 0\nx = a - b + y\n\nreturn x"
    assert edited(old, new)[2] == METHOD.replace("        x = a - b\n", "        y = 0\n        x = a - b + y\n")


def test_unchanged_lines_keep_the_files_text_and_omitted_blank_lines():
    text = "def f():\n    x  =  1   # aligned\n\n    return x\n"
    assert edited("def f():\n  x = 1 # aligned\n  return x", "def f():\n  x = 1 # aligned\n  return x + 1", text)[2] \
        == "def f():\n    x  =  1   # aligned\n\n    return x + 1\n"


def test_a_block_written_on_one_line_is_laid_out_on_the_files_lines():
    assert edited("def sub(self, a, b): x = a - b return x", "def sub(self, a, b): x = b - a return x") == (
        "whitespace", "matched ignoring whitespace at lines 2-5", METHOD.replace("a - b", "b - a"))
    # Words added at a line boundary get a line of their own with the next line's indentation.
    assert edited("x = a - b return x", "x = a - b print(x) return x")[2] == METHOD.replace(
        "\n        return x", "\n        print(x)\n        return x")
    # new_string on more lines than old_string: taken as written, rebased like old_string's first line.
    assert edited("def mul(self, a, b): return a * b", "def mul(self, a, b):\n    return b * a")[2] == \
        METHOD.replace("return a * b", "return b * a")


def test_deleting_a_loosely_matched_block_removes_its_lines():
    assert edited("def mul(self, a, b):\n    return a * b\n", "") == (
        "whitespace", "matched ignoring whitespace at lines 7-8", METHOD.replace(
            "    def mul(self, a, b):\n        return a * b\n", ""))


def test_loose_match_must_be_unique_unless_replace_all():
    text = "if a:\n    go()\nif b:\n    go()\n"
    assert error("\tgo()", "stop()", text) == (
        "old_string is not in the file as written, and ignoring whitespace it matches 2 places (lines 2, 4). Copy "
        "the text exactly as the file has it, with surrounding lines to make it unique, or set replace_all to true "
        "to change every occurrence.")
    assert edited("\tgo()", "\tstop()", text, replace_all=True) == (
        "whitespace", "matched ignoring whitespace at lines 2, 4", "if a:\n    stop()\nif b:\n    stop()\n")


def test_not_found_shows_the_closest_region_numbered():
    assert error("def sub(self, a, b):\n    y = a - b") == (
        "old_string was not found in the file. The closest text is at lines 2-3 (85% similar):\n"
        "     2\t    def sub(self, a, b):\n     3\t        x = a - b\n"
        "Copy the text exactly as the file has it (without Read's line-number prefix).")
    assert error("     3\t        y = a - b") == (
        "old_string was not found in the file, even without Read's line-number prefixes. The closest text is at "
        "line 3 (94% similar):\n     3\t        x = a - b\n"
        "Copy the text exactly as the file has it (without Read's line-number prefix).")
    assert error("while True:") == ("old_string was not found in the file. No similar text either; Read the file "
                                   "to see its current content.")
    # A fragment of a line is matched exactly only: whitespace inside a line fragment is not guessed.
    assert error("a  -  b").startswith("old_string was not found in the file.")


def test_loose_search_is_fast_on_a_big_file():
    text = "".join(f"    x = f({i})\n" for i in range(20_000))  # every line starts like old_string
    start = time.perf_counter()
    assert edited("x = f(19998)\nx = f(19999)", "x = f(19998)\nx = 0", text)[2].endswith("    x = f(19998)\n    x = 0\n")
    assert time.perf_counter() - start < 2.0
