"""The parse guard: Edit, MultiEdit and Write may not make a parsing .py/.json/.toml/.yaml/.ini file unparsable."""
from __future__ import annotations

from pathlib import Path

import pytest

from tools._parse_guard import Refusal, parse_problem
from tools.base import ToolContext, ToolResult
from tools.edit import EditTool
from tools.multiedit import MultiEditTool
from tools.read import ReadTool
from tools.write import WriteTool


@pytest.mark.parametrize("name, before, after, expected", [
    ("a.py", "def f():\n    return 1\n", "def f():\nreturn 1\n", Refusal(
        "invalid Python (line 2: expected an indented block after function definition on line 1)",
        "     1\tdef f():\n     2\treturn 1")),
    # The compiler's checks too, not only the parser's: this would fail at import.
    ("a.py", "x = 1\n", "return 1\n", Refusal("invalid Python (line 1: 'return' outside function)", "     1\treturn 1")),
    ("c.json", '{\n  "a": 1\n}\n', '{\n  "a": 1\n  "b": 2\n}\n', Refusal(
        "invalid JSON (line 3: Expecting ',' delimiter)", '     1\t{\n     2\t  "a": 1\n     3\t  "b": 2\n     4\t}')),
    ("c.toml", "a = 1\n", "a = 1\nb = \nc = 3\n", Refusal(
        "invalid TOML (line 2: Invalid value)", "     1\ta = 1\n     2\tb = \n     3\tc = 3")),
    ("c.yaml", "a: 1\n", "a: 1\n  b: 2\n", Refusal(
        "invalid YAML (line 2: mapping values are not allowed here)", "     1\ta: 1\n     2\t  b: 2")),
    ("c.yml", "a: 1\n", "a: [1,\n", Refusal(
        "invalid YAML (line 2: while parsing a flow node; expected the node content, but found '<stream end>')",
        "     1\ta: [1,")),
    ("c.ini", "[s]\na = 1\n", "[s]\na = 1\nnot a pair\n", Refusal(
        "invalid INI (line 3: not a key = value line: 'not a pair')", "     1\t[s]\n     2\ta = 1\n     3\tnot a pair")),
    ("setup.cfg", "[s]\na = 1\n", "[s]\na = 1\na = 2\n", Refusal(
        "invalid INI (line 3: option 'a' in section 's' appears twice)", "     1\t[s]\n     2\ta = 1\n     3\ta = 2")),
])
def test_a_change_that_breaks_parsing_is_named_with_its_region(name, before, after, expected):
    assert parse_problem(Path(name), before, after) == expected


def test_region_is_the_lines_around_the_error():
    after = "".join(f"x{i} = {i}\n" for i in range(1, 21)).replace("x10 = 10", "x10 = = 10")
    assert parse_problem(Path("m.py"), "", after) == Refusal(
        "invalid Python (line 10: invalid syntax)",
        "     7\tx7 = 7\n     8\tx8 = 8\n     9\tx9 = 9\n    10\tx10 = = 10\n"
        "    11\tx11 = 11\n    12\tx12 = 12\n    13\tx13 = 13")


def test_what_is_not_guarded():
    assert parse_problem(Path("a.json"), '{"a": 1}', '{"a": 2}') is None  # still parses
    assert parse_problem(Path("a.json"), '{"a": 1,}', '{"a": 2,}') is None  # did not parse before
    assert parse_problem(Path("notes.txt"), "x", "{") is None  # not a checked format
    assert parse_problem(Path("a.yaml"), "a: 1\n", "---\na: 1\n---\nb: 2\n") is None  # several documents are fine
    assert parse_problem(Path("new.cfg"), None, "nonsense") is None  # new .cfg/.ini: dialects vary too much
    assert parse_problem(Path("new.json"), None, "  \n") is None  # an empty placeholder
    assert parse_problem(Path("new.json"), None, "{") == Refusal(
        "invalid JSON (line 1: Expecting property name enclosed in double quotes)", "     1\t{")


def setup(tmp_path, name: str, text: str) -> tuple[Path, ToolContext]:
    f = tmp_path / name
    f.write_text(text)
    ctx = ToolContext(cwd=tmp_path)
    ReadTool().run({"file_path": name}, ctx)
    return f, ctx


SOURCE = "def total(xs):\n    s = 0\n    for x in xs:\n        s += x\n    return s\n"


def test_edit_that_breaks_python_is_refused_and_the_file_untouched(tmp_path):
    f, ctx = setup(tmp_path, "calc.py", SOURCE)
    result = EditTool().run({"file_path": "calc.py", "old_string": "for x in xs:", "new_string": "for x in xs"}, ctx)
    assert result == ToolResult(
        "calc.py was not changed: the edit would make it invalid Python (line 3: expected ':'). The result would read:\n"
        "     1\tdef total(xs):\n     2\t    s = 0\n     3\t    for x in xs\n     4\t        s += x\n     5\t    return s",
        is_error=True)
    assert f.read_text() == SOURCE


def test_multiedit_is_judged_on_its_final_text(tmp_path):
    f, ctx = setup(tmp_path, "calc.py", SOURCE)
    # The first edit alone would not parse (a loop with no body); the second restores one.
    result = MultiEditTool().run({"file_path": "calc.py", "edits": [
        {"old_string": "        s += x\n", "new_string": ""},
        {"old_string": "    for x in xs:\n", "new_string": "    for x in xs:\n        s += 2 * x\n"},
    ]}, ctx)
    assert not result.is_error
    assert f.read_text() == SOURCE.replace("s += x", "s += 2 * x")


def test_a_file_that_did_not_parse_can_still_be_edited(tmp_path):
    broken = "def f(:\n    return 1\n"
    f, ctx = setup(tmp_path, "wip.py", broken)
    assert not EditTool().run({"file_path": "wip.py", "old_string": "return 1", "new_string": "return 2"}, ctx).is_error
    assert f.read_text() == broken.replace("1", "2")


def test_write_that_breaks_a_config_is_refused(tmp_path):
    f, ctx = setup(tmp_path, "config.json", '{"debug": true}\n')
    assert WriteTool().run({"file_path": "config.json", "content": "debug: false\n"}, ctx) == ToolResult(
        "config.json was not changed: the new content is invalid JSON (line 1: Expecting value). It reads:\n"
        "     1\tdebug: false", is_error=True)
    assert f.read_text() == '{"debug": true}\n'


def test_write_of_a_new_file_that_does_not_parse_is_refused(tmp_path):
    ctx = ToolContext(cwd=tmp_path)
    assert WriteTool().run({"file_path": "pkg/new.py", "content": "def f()\n    pass\n"}, ctx) == ToolResult(
        "pkg/new.py was not created: the content is invalid Python (line 1: expected ':'). It reads:\n"
        "     1\tdef f()\n     2\t    pass", is_error=True)
    assert not (tmp_path / "pkg/new.py").exists()
    # Edit creating a file is guarded the same way; an unguarded format is created as given.
    assert EditTool().run({"file_path": "new.toml", "old_string": "", "new_string": "a = \n"}, ctx) == ToolResult(
        "new.toml was not created: the edit would make it invalid TOML (line 1: Invalid value). "
        "The result would read:\n     1\ta = ", is_error=True)
    assert not WriteTool().run({"file_path": "haproxy.cfg", "content": "global\n  maxconn 100\n"}, ctx).is_error
