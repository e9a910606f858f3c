"""runtime.chat_template: the GGUF's Qwen2.5 template rendered like HF apply_chat_template.

The expected strings are written out by hand from Qwen2.5's documented ChatML + Hermes-style
tool-call format, not produced by the code under test.
"""
from __future__ import annotations

import re

import pytest

from runtime.chat_template import ChatTemplate, TemplateError

DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

READ_TOOL = {"type": "function", "function": {
    "name": "Read", "description": "Read a file.",
    "parameters": {"type": "object", "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]}}}
GREP_TOOL = {"type": "function", "function": {
    "name": "Grep", "description": "Search file contents: «regex».",
    "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]}}}

TOOLS_BLOCK = (
    "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
    '{"type": "function", "function": {"name": "Read", "description": "Read a file.", "parameters": '
    '{"type": "object", "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]}}}\n'
    '{"type": "function", "function": {"name": "Grep", "description": "Search file contents: «regex».", '
    '"parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]}}}\n'
    "</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)


@pytest.fixture(scope="module")
def template(small_model_info) -> ChatTemplate:
    return ChatTemplate(small_model_info.chat_template)


def test_default_system_prompt_without_tools(template):
    text = template.render([{"role": "user", "content": "hi"}], add_generation_prompt=True)
    assert text == (f"<|im_start|>system\n{DEFAULT_SYSTEM}<|im_end|>\n"
                    "<|im_start|>user\nhi<|im_end|>\n"
                    "<|im_start|>assistant\n")


def test_conversation_with_system_and_no_generation_prompt(template):
    messages = [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "and 3+3?"},
    ]
    assert template.render(messages) == ("<|im_start|>system\nBe terse.<|im_end|>\n"
                                         "<|im_start|>user\n2+2?<|im_end|>\n"
                                         "<|im_start|>assistant\n4<|im_end|>\n"
                                         "<|im_start|>user\nand 3+3?<|im_end|>\n")


def test_tools_tool_calls_and_tool_results(template):
    messages = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Where is main defined?"},
        {"role": "assistant", "content": "Let me look.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "Grep", "arguments": {"pattern": "def main"}}},
            {"id": "c2", "type": "function", "function": {"name": "Read", "arguments": {"file_path": "src/é.py"}}},
        ]},
        {"role": "tool", "tool_call_id": "c1", "name": "Grep", "content": "src/app.py:3:def main():"},
        {"role": "tool", "tool_call_id": "c2", "name": "Read", "content": "1\tprint('x')"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c3", "type": "function", "function": {"name": "Read", "arguments": {"file_path": "src/app.py"}}}]},
        {"role": "tool", "tool_call_id": "c3", "name": "Read", "content": "3\tdef main():"},
    ]
    expected = (
        "<|im_start|>system\nYou are a coding agent." + TOOLS_BLOCK + "<|im_end|>\n"
        "<|im_start|>user\nWhere is main defined?<|im_end|>\n"
        "<|im_start|>assistant\nLet me look.\n"
        '<tool_call>\n{"name": "Grep", "arguments": {"pattern": "def main"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "Read", "arguments": {"file_path": "src/é.py"}}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\n<tool_response>\nsrc/app.py:3:def main():\n</tool_response>\n"
        "<tool_response>\n1\tprint('x')\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n"
        '<tool_call>\n{"name": "Read", "arguments": {"file_path": "src/app.py"}}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\n<tool_response>\n3\tdef main():\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert template.render(messages, [READ_TOOL, GREP_TOOL], add_generation_prompt=True) == expected


def test_tools_with_default_system_prompt(template):
    text = template.render([{"role": "user", "content": "hi"}], [READ_TOOL, GREP_TOOL], add_generation_prompt=True)
    assert text == ("<|im_start|>system\n" + DEFAULT_SYSTEM + TOOLS_BLOCK + "<|im_end|>\n"
                    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")


def test_empty_tool_list_renders_like_no_tools(template):
    messages = [{"role": "user", "content": "hi"}]
    assert template.render(messages, []) == template.render(messages, None)


def test_hf_globals_and_filters():
    source = ("{{ messages[0].content | tojson }}|{{ {'a': [1, 2]} | tojson(indent=2) }}|"
              "{{ strftime_now('%Y') }}{% for m in messages %}{% if loop.index > 0 %}{% break %}{% endif %}{% endfor %}")
    text = ChatTemplate(source).render([{"role": "user", "content": "<é>"}])
    year = re.fullmatch(r'"<é>"\|\{\n  "a": \[\n    1,\n    2\n  \]\n\}\|(\d{4})', text)
    assert year is not None


def test_errors_are_template_errors():
    with pytest.raises(TemplateError, match=r"^chat template failed: no tools here$"):
        ChatTemplate("{{ raise_exception('no tools here') }}").render([])
    with pytest.raises(TemplateError, match=r"^chat template does not compile: .* \(line 1\)$"):
        ChatTemplate("{% if %}")
    with pytest.raises(TemplateError, match=r"^the model has no chat template"):
        ChatTemplate(None)
    with pytest.raises(TemplateError, match=r"^chat template failed: .*unsafe"):
        ChatTemplate("{{ messages.append(1) }}").render([])  # sandboxed and immutable, like HF
