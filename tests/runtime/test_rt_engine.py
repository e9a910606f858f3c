"""LocalEngine on a tiny random-weight GGUF with the real vocabulary and template."""
import threading

import pytest
import torch

from runtime.api import Done, Progress, Request, Sampling, TextDelta
from runtime.engine import LocalEngine
from runtime.options import RuntimeOptions

TOOLS = [{"type": "function", "function": {"name": "Read", "description": "Read a file",
                                          "parameters": {"type": "object", "properties": {"file_path": {"type": "string"}},
                                                         "required": ["file_path"]}}}]


@pytest.fixture(scope="module")
def engine(tiny_gguf_path, tmp_path_factory):
    return LocalEngine.from_spec(str(tiny_gguf_path), RuntimeOptions(threads=2), cache_dir=tmp_path_factory.mktemp("cache"))


def run(engine, sid, messages, max_tokens=8, cancel=None):
    events = list(engine.stream(Request(sid, messages, TOOLS, Sampling(max_tokens=max_tokens)), cancel=cancel))
    done = events[-1]
    assert isinstance(done, Done) and sum(isinstance(e, Done) for e in events) == 1
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    return events, text, done


def test_second_turn_prefills_only_new_tokens(engine):
    msgs = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hello there"}]
    _, text1, done1 = run(engine, "two-turn", msgs)
    assert done1.usage.reused_tokens == 0 and done1.usage.prefilled_tokens == done1.usage.prompt_tokens
    assert done1.usage.generated_tokens == 8 and done1.stop_reason == "max_tokens"
    turn1_tokens = engine.session_tokens("two-turn")
    msgs2 = msgs + [{"role": "assistant", "content": text1}, {"role": "user", "content": "and now?"}]
    _, _, done2 = run(engine, "two-turn", msgs2)
    new_tokens = done2.usage.prompt_tokens - len(turn1_tokens)
    # The cache holds turn 1 except its last sampled token and the end-of-turn glue, which are fed again.
    assert done2.usage.prompt_tokens > len(turn1_tokens)
    assert done2.usage.reused_tokens >= len(turn1_tokens) - 3
    assert done2.usage.prefilled_tokens <= new_tokens + 3


def test_greedy_is_deterministic_and_sessions_are_independent(engine):
    msgs = [{"role": "user", "content": "count: 1 2 3"}]
    _, a, _ = run(engine, "det-a", msgs)
    _, b, _ = run(engine, "det-b", msgs)
    assert a == b


def test_cancel_mid_decode_then_continue_matches_uninterrupted(engine):
    msgs = [{"role": "user", "content": "write a poem"}]
    _, full, _ = run(engine, "ref", msgs, max_tokens=12)
    cancel = threading.Event()
    got = []
    for e in engine.stream(Request("cut", msgs, TOOLS, Sampling(max_tokens=12)), cancel=cancel):
        if isinstance(e, TextDelta):
            got.append(e.text)
            if len(got) == 3:
                cancel.set()
        last = e
    assert last.stop_reason == "cancelled"
    # The cache is consistent: a rerun of the same prompt reuses it and gives the uninterrupted output.
    _, again, done = run(engine, "cut", msgs, max_tokens=12)
    assert again == full and done.usage.reused_tokens > 0


def test_prefill_progress_events(engine):
    msgs = [{"role": "user", "content": "word " * 600}]
    events, _, _ = run(engine, "progress", msgs, max_tokens=1)
    progress = [e for e in events if isinstance(e, Progress)]
    assert progress and progress[-1].done == progress[-1].total and progress[-1].what == "prefill"


def test_fork_and_save_load_session(engine, tmp_path):
    msgs = [{"role": "system", "content": "shared prefix " * 20}, {"role": "user", "content": "hi"}]
    run(engine, "parent", msgs)
    held = engine.fork_session("parent", "child")
    assert held > 0
    _, _, done = run(engine, "child", msgs[:1] + [{"role": "user", "content": "other question"}])
    assert done.usage.reused_tokens >= 40
    assert engine.save_session("parent", tmp_path / "kv.bin")
    assert engine.load_session("restored", tmp_path / "kv.bin") > 0
    _, _, done = run(engine, "restored", msgs)
    assert done.usage.reused_tokens == done.usage.prompt_tokens - 1
    (tmp_path / "bad.bin").write_bytes(b"garbage")
    assert engine.load_session("bad", tmp_path / "bad.bin") == 0


def test_context_full_is_reported(tiny_gguf_path, tmp_path):
    small = LocalEngine.from_spec(str(tiny_gguf_path), RuntimeOptions(threads=2), cache_dir=tmp_path, max_context=32)
    _, _, done = run(small, "s", [{"role": "user", "content": "word " * 100}])
    assert done.stop_reason == "context_full" and "context window is 32" in done.error


def test_speculation_reports_drafts_and_changes_no_token(engine):
    # A tool result to copy from: the drafter sees it raw, without line numbers and JSON-escaped.
    body = "\n".join(f"{i:6}\tline {i} = value_{i}" for i in range(1, 30))
    messages = [{"role": "user", "content": "show the file"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "Read", "arguments": {"file_path": "f"}}}]},
                {"role": "tool", "tool_call_id": "c1", "name": "Read", "content": body}]
    outs = {}
    for spec in (False, True):
        req = Request(f"spec-{spec}", messages, sampling=Sampling(max_tokens=48), speculation=spec)
        events = list(engine.stream(req))
        outs[spec] = ("".join(e.text for e in events if isinstance(e, TextDelta)), events[-1].usage)
    assert outs[True][0] == outs[False][0]
    assert outs[False][1].drafted_tokens == 0
    assert outs[True][1].accepted_tokens <= outs[True][1].drafted_tokens


def test_the_engine_runs_the_cuda_model_class_on_cpu(engine, tiny_gguf_path, tmp_path):
    """LocalEngine with runtime.cuda's model (its new_cache/load_cache, the same forward contract), here on the
    CPU in fp32 without Triton or graphs: the wiring a GPU machine uses, checked against the CPU model."""
    from runtime.cuda import build_cuda_model
    from runtime.gguf_loader import load_model_files
    from runtime.weights import FORMAT_ID, prepare_tensor

    loaded = load_model_files(tiny_gguf_path, prepare_tensor, FORMAT_ID, tmp_path / "cache", None)
    model = build_cuda_model(loaded.config, loaded.tensors, device="cpu", dtype=torch.float32, use_triton=False,
                             graphs=False)
    dev = LocalEngine(model, engine.tokenizer, engine.builder.template, name="tiny-device", model_id="tiny:device")
    msgs = [{"role": "user", "content": "count with me"}]
    _, text_cpu, _ = run(engine, "cuda-ref", msgs, max_tokens=10)
    _, text_dev, done = run(dev, "cuda-a", msgs, max_tokens=10)
    assert text_dev == text_cpu and done.usage.generated_tokens == 10
    assert type(dev._sessions["cuda-a"].cache).__name__ == "CudaKVCache"
    assert dev.save_session("cuda-a", tmp_path / "s.kv")
    assert dev.load_session("cuda-b", tmp_path / "s.kv") > 0
    _, text_b, done_b = run(dev, "cuda-b", msgs + [{"role": "assistant", "content": text_dev},
                                                  {"role": "user", "content": "again"}], max_tokens=4)
    assert done_b.usage.reused_tokens > 0
