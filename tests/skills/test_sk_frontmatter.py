"""Frontmatter parsing: strict YAML, the lenient fallback for unquoted colons, and clear errors."""
from __future__ import annotations

import pytest

from skills.frontmatter import (FrontmatterError, as_bool, parse_frontmatter, read_frontmatter_file,
                                split_tool_list)


def test_fields_and_body():
    text = "---\nname: pdf\ndescription: Work with PDFs.\nallowed-tools: [Read, Grep]\n---\n\n# PDF\nBody.\n"
    assert parse_frontmatter(text) == ({"name": "pdf", "description": "Work with PDFs.",
                                        "allowed-tools": ["Read", "Grep"]}, "# PDF\nBody.")


def test_no_frontmatter_is_all_body_and_empty_frontmatter_is_no_fields():
    assert parse_frontmatter("Just a prompt.\n---\n") == ({}, "Just a prompt.\n---\n")
    assert parse_frontmatter("---\n---\nBody") == ({}, "Body")


def test_crlf_and_bom_are_tolerated():
    assert parse_frontmatter("\ufeff---\r\nname: x\r\n---\r\nBody\r\n") == ({"name": "x"}, "Body")


def test_unquoted_colons_fall_back_to_plain_key_value_lines():
    text = ("---\nname: brainstorm\ndescription: Produces a brainstorm: goals, risks.\n"
            "  Use before big changes.\ndisable-model-invocation: true\ntools:\n  - Read\n  - Grep\n---\nBody")
    assert parse_frontmatter(text) == ({"name": "brainstorm",
                                        "description": "Produces a brainstorm: goals, risks. Use before big changes.",
                                        "disable-model-invocation": True, "tools": ["Read", "Grep"]}, "Body")


def test_fallback_keeps_prose_fields_verbatim_and_still_reads_yaml_values():
    text = ("---\ndescription: Tag things. Use when: tagging\nargument-hint: [issue-number] [priority]\n"
            "allowed-tools: [Read, Grep]\nuser-invocable: false\n---\n")
    assert parse_frontmatter(text)[0] == {"description": "Tag things. Use when: tagging",
                                          "argument-hint": "[issue-number] [priority]",
                                          "allowed-tools": ["Read", "Grep"], "user-invocable": False}


@pytest.mark.parametrize("text,message", [
    ("---\nname: x\ndescription: y\n", "SKILL.md: frontmatter is not closed (no second '---' line)"),
    ("---\nname: x\ntools: [Read, Grep\n---\n",
     "SKILL.md: invalid YAML frontmatter at line 3: expected ',' or ']', but got '<stream end>'"),
    ("---\nname: x\ndescription: \"unclosed\nmodel: y\n---\n",
     "SKILL.md: invalid YAML frontmatter at line 4: found unexpected end of stream"),
    ("---\nname: x\nthis line is not a key\n---\n",
     "SKILL.md: invalid YAML frontmatter at line 3: could not find expected ':'"),
    ("---\n- a\n- b\n---\n", "SKILL.md: frontmatter must be `key: value` lines, got list"),
])
def test_errors_are_one_line_and_name_the_file(text, message):
    with pytest.raises(FrontmatterError) as e:
        parse_frontmatter(text, "SKILL.md")
    assert str(e.value) == message


def test_unreadable_file_is_a_frontmatter_error(tmp_path):
    bad = tmp_path / "SKILL.md"
    bad.write_bytes(b"---\nname: \xff\n---\n")
    with pytest.raises(FrontmatterError) as e:
        read_frontmatter_file(bad)
    assert str(e.value).startswith(f"{bad}: cannot read (UnicodeDecodeError: ")
    with pytest.raises(FrontmatterError):
        read_frontmatter_file(tmp_path / "missing.md")


@pytest.mark.parametrize("value,expected", [
    ("Bash(git log *) Read", ["Bash(git log *)", "Read"]),
    ("Read, Grep,Glob", ["Read", "Grep", "Glob"]),
    (["Bash(npm run test:*)", "Edit(src/**)"], ["Bash(npm run test:*)", "Edit(src/**)"]),
    (["Read, Grep"], ["Read", "Grep"]),
    ("Bash(git diff *), WebFetch(domain:example.com)", ["Bash(git diff *)", "WebFetch(domain:example.com)"]),
    ("", []), (None, []),
])
def test_split_tool_list(value, expected):
    assert split_tool_list(value) == expected


def test_as_bool():
    assert [as_bool(v, None) for v in (True, False, "true", "No", "maybe", None, 1)] == \
           [True, False, True, False, None, None, None]
