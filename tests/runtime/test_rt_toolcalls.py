import itertools

from runtime.toolcalls import ParsedCall, ToolCallParser, parse_call_json

REPLY = 'Let me look.\n<tool_call>\n{"name": "Read", "arguments": {"file_path": "a.py"}}\n</tool_call>\n<tool_call>\n{"name": "LS", "arguments": {"path": "."}}\n</tool_call>'


def run(parser, chunks):
    out = []
    for c in chunks:
        out += parser.feed(c)
    return out + parser.finish()


def merge_text(events):
    merged = []
    for e in events:
        if isinstance(e, str) and merged and isinstance(merged[-1], str):
            merged[-1] += e
        else:
            merged.append(e)
    return merged


def test_whole_reply():
    events = merge_text(run(ToolCallParser(), [REPLY]))
    assert events == [
        "Let me look.\n",
        ParsedCall("Read", {"file_path": "a.py"}, '\n{"name": "Read", "arguments": {"file_path": "a.py"}}\n'),
        "\n",
        ParsedCall("LS", {"path": "."}, '\n{"name": "LS", "arguments": {"path": "."}}\n'),
    ]


def test_any_chunking_gives_same_events():
    expected = merge_text(run(ToolCallParser(), [REPLY]))
    for size in (1, 2, 3, 5, 7, 11):
        chunks = ["".join(c) for c in itertools.zip_longest(*[iter(REPLY)] * size, fillvalue="")]
        assert merge_text(run(ToolCallParser(), chunks)) == expected


def test_text_streams_before_call_completes():
    p = ToolCallParser()
    assert p.feed("Hello <tool") == ["Hello "]
    assert p.feed("_call>{\"name\": ") == []
    assert p.feed('"LS", "arguments": {}}</tool_call>') == [ParsedCall("LS", {}, '{"name": "LS", "arguments": {}}')]


def test_lookalike_tag_is_text():
    assert merge_text(run(ToolCallParser(), ["a <tool_x> b <tool"])) == ["a <tool_x> b <tool"]


def test_unclosed_call_at_end_is_parsed():
    events = run(ToolCallParser(), ['<tool_call>\n{"name": "LS", "arguments": {"path": "src"}}\n'])
    assert [e for e in events if isinstance(e, ParsedCall)][0].arguments == {"path": "src"}


def test_malformed_json_is_an_error_call():
    (call,) = run(ToolCallParser(), ['<tool_call>{"name": "Read", "arguments": {"file_path": }</tool_call>'])
    assert call.name == "" and call.error.startswith("tool call is not valid JSON")


def test_arguments_as_string_and_not_object():
    assert parse_call_json('{"name": "LS", "arguments": "{\\"path\\": \\"x\\"}"}').arguments == {"path": "x"}
    assert parse_call_json('{"name": "LS", "arguments": [1]}').error == "tool call arguments must be a JSON object"
    assert parse_call_json('[1, 2]').error.startswith("tool call must be an object")


def test_bare_json_reply_for_offered_tool_becomes_call():
    p = ToolCallParser(tool_names=frozenset({"Read"}))
    events = run(p, ['```json\n{"name": "Read", "arguments": {"file_path": "x"}}\n```'])
    assert events[-1] == ParsedCall("Read", {"file_path": "x"}, '```json\n{"name": "Read", "arguments": {"file_path": "x"}}\n```')
    p2 = ToolCallParser(tool_names=frozenset({"Read"}))
    assert not any(isinstance(e, ParsedCall) for e in run(p2, ['{"name": "Nope", "arguments": {}}']))
