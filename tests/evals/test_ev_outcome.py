"""RunView (what verifiers see) and per-run metrics, on transcripts shaped as agent/session.py writes them."""
import json

import pytest

from evals.outcome import RunView, first_round, looks_like_call, metrics, read_transcript


def msg(m):
    return {"type": "message", "message": m}


def call(cid, name, args):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


TRANSCRIPT = [
    {"type": "meta", "session_id": "s1"},
    msg({"role": "system", "content": "sys"}),
    msg({"role": "user", "content": "q"}),
    msg({"role": "assistant", "content": "", "tool_calls": [call("toolu_1", "Read", {"file_path": "a.txt"}),
                                                            call("toolu_2", "Nope", {})]}),
    msg({"role": "tool", "tool_call_id": "toolu_1", "name": "Read", "content": "     1\tA"}),
    msg({"role": "tool", "tool_call_id": "toolu_2", "name": "Nope",
         "content": "Error: there is no tool named 'Nope'. Available tools: Read."}),
    msg({"role": "assistant", "content": "", "tool_calls": [call("toolu_3", "Edit", {"file_path": "a.txt"})]}),
    msg({"role": "tool", "tool_call_id": "toolu_3", "name": "Edit", "content": "old_string was not found in the file."}),
    {"type": "usage", "turn": 1, "usage": {}},
    msg({"role": "assistant", "content": "A"}),
]
STREAM = [{"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "toolu_3", "is_error": True}]}}]
RESULT = {"type": "result", "subtype": "success", "num_turns": 3, "result": "A", "session_id": "s1",
          "usage": {"reused_tokens": 100, "prefilled_tokens": 40, "drafted_tokens": 8, "accepted_tokens": 5,
                    "output_tokens": 30}}


def view(tmp_path, results=(RESULT,)):
    (tmp_path / "proj").mkdir(exist_ok=True)
    (tmp_path / "fx").mkdir(exist_ok=True)
    return RunView(tmp_path / "proj", tmp_path / "fx", list(results), TRANSCRIPT, STREAM)


def test_calls_and_results_in_order_with_error_flags(tmp_path):
    v = view(tmp_path)
    assert [c["name"] for c in v.tool_calls] == ["Read", "Nope", "Edit"]
    assert [(r["id"], r["is_error"]) for r in v.tool_results] == [("toolu_1", False), ("toolu_2", True),
                                                                   ("toolu_3", True)]
    assert v.calls("Read") == [{"file_path": "a.txt"}]
    assert v.succeeded("Read") == [({"file_path": "a.txt"}, "     1\tA")]
    assert v.succeeded("Edit") == [] and v.succeeded("Nope") == []
    assert v.answer == "A" and v.ok


def test_metrics_count_malformed_calls_and_tokens(tmp_path):
    assert metrics(view(tmp_path)) == {"turns": 3, "tool_calls": 3, "malformed_calls": 1, "text_calls": 0,
                                       "reused_tokens": 100, "prefilled_tokens": 40, "drafted_tokens": 8,
                                       "accepted_tokens": 5, "output_tokens": 30, "first_candidates": 0,
                                       "first_passed": 0}


def step(name, detail):
    return {"type": "system", "subtype": "pipeline_step", "session_id": "s1", "step": name, "detail": detail}


def test_first_round_counts_the_first_sampled_round_only():
    stream = [step("edit", "a.py (whole file)"), step("tries", "8 candidates, 2 passed, applied #6"),
              step("tries", "4 candidates, 1 passed, applied #1")]
    assert first_round(stream) == (8, 2)
    assert first_round([step("tries", "unavailable (RuntimeError: x); one try"),
                        step("tries", "4 candidates, 0 passed (the nearest passed 3 tests), applied #4")]) == (4, 0)
    assert first_round([step("edit", "4 candidates, 1 passed")]) == (0, 0)
    assert first_round(STREAM) == (0, 0)


def test_untouched_view_has_no_answer_and_is_not_ok(tmp_path):
    v = RunView(tmp_path, tmp_path)
    assert (v.answer, v.ok, v.tool_calls, metrics(v)["turns"]) == ("", False, [], 0)


def test_a_failed_prompt_makes_the_run_not_ok(tmp_path):
    assert not view(tmp_path, [RESULT, {**RESULT, "subtype": "error_max_turns"}]).ok


@pytest.mark.parametrize("text, expected", [
    ('```json\n{\n  "name": "MultiEdit",\n  "arguments": []\n}\n```', True),
    ('{"name": "Read", "arguments": {"file_path": "x"}}', True),
    ("<tool_call>\n{}", True),
    ('({"name": "Read", "arguments": {"file_path": "/tmp/p/proj", "offset": 1, "limit": 2000}}', True),
    ("The port is 48213.", False),
    ('The config has {"name": "web"} in it.', False),
])
def test_calls_written_as_text_are_recognized(text, expected):
    assert looks_like_call(text) is expected


def test_file_helpers_and_commands_work_in_the_copy(tmp_path):
    v = view(tmp_path)
    (v.dir / "d.json").write_text('{"a": 1}')
    (v.fixture / "d.json").write_text('{"a": 0}')
    (v.dir / "bad.json").write_text("{")
    assert v.json("d.json") == {"a": 1} and v.json("bad.json") is None and v.original("d.json") == '{"a": 0}'
    assert v.text("missing.txt") == "" and not v.exists("missing.txt")
    assert v.sh("pwd").stdout.strip() == str(v.dir)
    assert v.python("-c", "print(6 * 7)").stdout == "42\n"


def test_read_transcript_skips_a_torn_line(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps({"type": "meta"}) + "\n" + '{"type": "mess')
    assert read_transcript(p) == [{"type": "meta"}]
