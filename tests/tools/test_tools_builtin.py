"""The built-in tool set: names and fields as FORMATS.md, strict schemas, short descriptions, fresh instances."""
from __future__ import annotations

import re

from tools import READ_ONLY_TOOL_NAMES, builtin_tools
from tools.base import schema_for_engine

FIELDS = {
    "Read": ["file_path", "offset", "limit"],
    "Write": ["file_path", "content"],
    "Edit": ["file_path", "old_string", "new_string", "replace_all"],
    "MultiEdit": ["file_path", "edits"],
    "Bash": ["command", "timeout", "description", "run_in_background"],
    "BashOutput": ["bash_id", "filter"],
    "KillShell": ["shell_id"],
    "Grep": ["pattern", "path", "glob", "type", "output_mode", "-i", "-n", "-A", "-B", "-C", "head_limit"],
    "Glob": ["pattern", "path"],
    "LS": ["path", "ignore"],
    "TodoWrite": ["todos"],
    "WebFetch": ["url", "prompt"],
}


def strict(schema: dict, where: str) -> None:
    assert schema["type"] == "object" and schema["additionalProperties"] is False, where
    assert set(schema["required"]) <= set(schema["properties"]), where
    for name, prop in schema["properties"].items():
        assert "type" in prop, f"{where}.{name}"
        if prop["type"] == "array" and prop["items"]["type"] == "object":
            strict(prop["items"], f"{where}.{name}[]")


def test_names_fields_and_strict_schemas():
    tools = builtin_tools()
    assert {t.name: list(t.input_schema["properties"]) for t in tools} == FIELDS
    for tool in tools:
        strict(tool.input_schema, tool.name)
        assert schema_for_engine(tool)["function"]["name"] == tool.name


def test_descriptions_are_short():
    for tool in builtin_tools():
        sentences = len(re.findall(r"[.!?](\s|$)", tool.description.split("Example:")[0].replace("e.g.", "eg")))
        assert 1 <= sentences <= 4 and len(tool.description) <= 400, (tool.name, sentences, len(tool.description))


def test_read_only_names_match_the_flags_and_instances_are_fresh():
    assert READ_ONLY_TOOL_NAMES == {t.name for t in builtin_tools() if t.read_only}
    assert READ_ONLY_TOOL_NAMES == {"Read", "Grep", "Glob", "LS", "TodoWrite", "WebFetch", "BashOutput", "KillShell"}
    first, second = builtin_tools(), builtin_tools()
    assert all(a is not b for a, b in zip(first, second))
