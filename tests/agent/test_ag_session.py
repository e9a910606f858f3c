"""Transcripts: written as events happen, restored exactly, tolerant of a torn last line."""
import json
import os
import time

import pytest

from agent.core import events as ev
from agent.paths import data_dir, project_key
from agent.core.transcript import Session, SessionError, find_session, latest_session
from runtime.api import Usage

MESSAGES = [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi ünïcode"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "toolu_1", "type": "function", "function": {"name": "Read", "arguments": {"file_path": "a"}}},
                {"id": "toolu_2", "type": "function", "function": {"name": "LS", "arguments": {"path": "."}}}]},
            {"role": "tool", "tool_call_id": "toolu_1", "name": "Read", "content": "1\tx"},
            {"role": "tool", "tool_call_id": "toolu_2", "name": "LS", "content": "a"},
            {"role": "assistant", "content": "done"}]


@pytest.fixture(autouse=True)
def data(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_DATA_DIR", str(tmp_path / "data"))


def test_paths(tmp_path):
    assert data_dir() == tmp_path / "data"
    assert project_key(tmp_path.parent / "my proj_v1.2") == project_key(tmp_path.parent) + "-my-proj-v1-2"
    long = project_key(tmp_path / ("x" * 300))
    assert len(long) == 117 and long != project_key(tmp_path / ("x" * 299))


def test_transcript_lines_and_exact_restore(tmp_path):
    s = Session.create(tmp_path, {"model": "m", "engine": "scripted"})
    for m in MESSAGES:
        s.append(m)
    s.recorder(ev.TurnUsage(turn=1, usage=Usage(prompt_tokens=10, reused_tokens=4, prefilled_tokens=6)))
    # Lines are on disk as soon as they are written, before close.
    lines = [json.loads(x) for x in s.transcript_path.read_text().splitlines()]
    assert s.transcript_path == tmp_path / "data" / "projects" / project_key(tmp_path) / f"{s.session_id}.jsonl"
    assert {k: lines[0][k] for k in ("type", "session_id", "cwd", "model", "engine", "version")} == {
        "type": "meta", "session_id": s.session_id, "cwd": str(tmp_path), "model": "m", "engine": "scripted",
        "version": 1}
    assert [x["message"] for x in lines[1:-1]] == MESSAGES
    assert lines[-1] == {"type": "usage", "turn": 1, "usage": {
        "prompt_tokens": 10, "reused_tokens": 4, "prefilled_tokens": 6, "generated_tokens": 0, "drafted_tokens": 0,
        "accepted_tokens": 0, "ttft_s": 0.0, "prefill_tps": 0.0, "decode_tps": 0.0}}
    s.close()
    back = Session.load(s.transcript_path)
    assert (back.session_id, back.messages, back.next_tool_id, back.warnings) == (s.session_id, MESSAGES, 3, [])
    assert back.new_tool_id() == "toolu_3"


def test_torn_last_line_is_skipped_and_appending_continues_cleanly(tmp_path):
    s = Session.create(tmp_path)
    for m in MESSAGES[:2]:
        s.append(m)
    s.close()
    with open(s.transcript_path, "a") as f:
        f.write('{"type": "message", "message": {"role": "assis')  # a crash mid-write
    back = Session.load(s.transcript_path)
    assert back.messages == MESSAGES[:2]
    assert back.warnings == [f"{s.session_id}.jsonl: skipped unreadable line 4"]
    back.append({"role": "user", "content": "again"})
    back.close()
    again = Session.load(s.transcript_path)
    assert again.messages == MESSAGES[:2] + [{"role": "user", "content": "again"}]
    assert again.warnings == back.warnings


def test_latest_and_find(tmp_path):
    with pytest.raises(SessionError, match="no earlier session in"):
        latest_session(tmp_path)
    a = Session.create(tmp_path)
    a.close()
    b = Session.create(tmp_path)
    b.close()
    past = time.time() - 100
    os.utime(a.transcript_path, (past, past))
    assert latest_session(tmp_path) == b.transcript_path
    other = tmp_path / "other"
    other.mkdir()
    assert find_session(a.session_id, tmp_path) == a.transcript_path
    assert find_session(a.session_id, other) == a.transcript_path  # found in another project
    with pytest.raises(SessionError, match="^no session nope "):
        find_session("nope", tmp_path)
    with pytest.raises(SessionError, match="not a session id"):
        find_session("../x", tmp_path)


def test_last_todos_come_from_the_last_todowrite_call(tmp_path):
    s = Session.create(tmp_path)
    assert s.last_todos() == []
    for todos in ([{"content": "a", "status": "pending"}], [{"content": "a", "status": "completed"}]):
        s.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": "toolu_1", "type": "function", "function": {"name": "TodoWrite", "arguments": {"todos": todos}}}]})
        s.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": "toolu_2", "type": "function", "function": {"name": "Read", "arguments": {"file_path": "x"}}}]})
    assert s.last_todos() == [{"content": "a", "status": "completed"}]


def test_rewind_record_cuts_the_replayed_history_but_not_tool_ids(tmp_path):
    s = Session.create(tmp_path)
    for m in MESSAGES:
        s.append(m)
    s.record({"type": "rewind", "to_message_index": 2, "checkpoint": "abc", "ts": 1.0})
    s.append({"role": "user", "content": "instead"})
    s.close()
    back = Session.load(s.transcript_path)
    assert back.messages == MESSAGES[:2] + [{"role": "user", "content": "instead"}]
    assert back.new_tool_id() == "toolu_3"


def test_prune_kv_files_keeps_the_most_recent(tmp_path):
    from agent.paths import project_sessions_dir
    from agent.core.transcript import prune_kv_files
    d = project_sessions_dir(tmp_path)
    d.mkdir(parents=True)
    for i in range(5):
        (d / f"s{i}.kv").write_bytes(b"kv")
        os.utime(d / f"s{i}.kv", (1000 + i, 1000 + i))
    (d / "s0.jsonl").write_text("")
    assert sorted(p.name for p in prune_kv_files(tmp_path, keep=2)) == ["s0.kv", "s1.kv", "s2.kv"]
    assert sorted(p.name for p in d.iterdir()) == ["s0.jsonl", "s3.kv", "s4.kv"]
