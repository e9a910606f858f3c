"""Token accounting, thresholds and stale tool-result clearing, with the scripted engine and real tools."""
import json

import pytest

from agent.services.compaction import ContextGuard, ToolResultsCleared
from agent.services.context_budget import (PLACEHOLDER, BudgetConfig, TokenMeter, budget_from_settings, is_placeholder,
                                  parse_threshold, plan_clearing)
from agent.engines.scripted import ScriptedEngine
from agent.core.loop import Agent
from agent.core.transcript import Session
from tools import builtin_tools
from tools.base import ToolContext

NAMES = "abcde"


@pytest.fixture
def proj(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_DATA_DIR", str(tmp_path / "data"))
    p = tmp_path / "proj"
    p.mkdir()
    for n in NAMES:  # each Read result is ~400 whitespace tokens ("1", "a0", "2", "a1", ...)
        (p / f"{n}.txt").write_text("\n".join(f"{n}{i}" for i in range(200)) + "\n")
    return p


def reads(*names):
    return [{"tool_calls": [{"name": "Read", "arguments": {"file_path": f"{n}.txt"}}]} for n in names]


def make(proj, turns, window, config=None):
    engine = ScriptedEngine(turns, context_window=window)
    agent = Agent(engine, builtin_tools(), Session.create(proj), ToolContext(cwd=proj),
                  system_prompt="You are a test agent.")
    guard = ContextGuard(agent, config or BudgetConfig(keep_results=1))
    seen = []
    agent.before_query.append(lambda a, cancel: seen.append(guard.tokens()))  # after the guard acted
    return agent, engine, guard, seen


def test_parse_threshold():
    assert [parse_threshold(v) for v in (0.8, 80, "80%", "0.75", 1, 0, 150, "x", True, None)] == \
        [0.8, 0.8, 0.8, 0.75, 1.0, None, None, None, None, None]


def test_budget_from_settings_precedence_flag_and_warnings(tmp_path):
    from hooks.settings import load_settings
    proj = tmp_path / "p"
    (proj / ".agent").mkdir(parents=True)
    local, shared = proj / ".agent/settings.local.json", proj / ".agent/settings.json"
    local.write_text(json.dumps({"autoCompactThreshold": 70}))
    shared.write_text(json.dumps({"autoCompactThreshold": 0.9, "clearToolResultsThreshold": "bad", "autoCompact": False}))
    values = load_settings(proj, tmp_path / "u", tmp_path / "c").other
    config, warnings = budget_from_settings(values)
    assert (config.compact_at, config.clear_at, config.auto_compact) == (0.7, 0.6, False)
    assert warnings == [f"settings: {shared}: clearToolResultsThreshold must be a fraction (0.8) or a percentage "
                        f"(80); ignored"]
    config, _ = budget_from_settings({"autoCompactThreshold": (70, str(local))}, compact_at=0.5)  # the flag wins
    assert (config.compact_at, config.clear_at, config.auto_compact) == (0.5, 0.5, True)
    assert budget_from_settings({}) == (BudgetConfig(), [])


def test_meter_is_exact_after_the_first_call_and_close_before(proj):
    agent, engine, guard, seen = make(proj, reads(*NAMES) + [{"text": "done"}], window=10**6)
    result = agent.run("read them all")
    prompts = [u.prompt_tokens for u in result.turn_usage]
    assert len(prompts) == 6 and prompts[0] > 800
    assert abs(seen[0] - prompts[0]) <= 5  # a full count: the engine's own tokenizer, plus template glue
    assert seen[1:] == prompts[1:]  # anchored on the engine's usage: exact


def test_action_boundaries(proj):
    agent, _, guard, _ = make(proj, [], window=1000)
    assert [guard.action(n) for n in (599, 600, 799, 800, 5000)] == ["none", "clear", "clear", "compact", "compact"]
    guard.config.auto_compact = False
    assert guard.action(900) == "clear"


def test_plan_clearing_keeps_the_most_recent_results_and_the_calls():
    meter = TokenMeter(lambda t: len(t.split()))
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    for i in range(4):
        messages += [{"role": "assistant", "content": "", "tool_calls": [
            {"id": f"t{i}", "type": "function", "function": {"name": "Read", "arguments": {"file_path": f"{i}"}}}]},
            {"role": "tool", "tool_call_id": f"t{i}", "name": "Read", "content": "word " * (50 if i != 1 else 2)}]
    plan = plan_clearing(messages, meter, keep=2)
    text = PLACEHOLDER.format(name="Read")
    assert plan.edits == [(3, text)]  # result 1 is shorter than the placeholder; 2 and 3 are kept
    assert (plan.first, plan.freed) == (3, 50 - len(text.split()))
    assert is_placeholder(text) and not is_placeholder("word")


def test_clearing_triggers_at_the_first_threshold_and_costs_a_reported_prefill(proj):
    turns = reads(*NAMES) + [{"text": "done"}]
    dry, _, _, sizes = make(proj, turns, window=10**6)
    dry.run("read them all")
    # 0.6 of the window falls between the 4th and the 5th prompt: clearing must come right before call 5.
    window = int((sizes[3] + sizes[4]) / 2 / 0.6)
    agent, engine, guard, seen = make(proj, turns, window=window)
    cleared = []
    agent.bus.subscribe(lambda e: cleared.append(e) if isinstance(e, ToolResultsCleared) else None)
    result = agent.run("read them all")
    assert result.stop_reason == "end_turn"
    tool_texts = [[m["content"] for m in r.messages if m["role"] == "tool"] for r in engine.requests]
    assert not any(is_placeholder(t) for texts in tool_texts[:4] for t in texts)
    assert [is_placeholder(t) for t in tool_texts[4]] == [True, True, True, False]  # keep_results=1
    assert [is_placeholder(t) for t in tool_texts[5]] == [True, True, True, False, False]  # not again: under 0.6
    (e,) = cleared
    assert (e.count, e.tokens_before) == (3, sizes[4]) and e.tokens_after == seen[4]
    u = result.turn_usage[4]  # the measured cost: everything from the first cleared result is prefilled
    assert u.prefilled_tokens == pytest.approx(e.prefill_tokens, rel=0.03)  # estimates: per-message glue
    assert u.prompt_tokens == pytest.approx(e.tokens_after, rel=0.03) and u.reused_tokens > 800
    # The transcript records the clearing, so a resumed session sees (and the KV file holds) the same history.
    record = [json.loads(x) for x in agent.session.transcript_path.read_text().splitlines()
              if json.loads(x)["type"] == "clear"]
    assert [r["edits"] for r in record] == [[[3, PLACEHOLDER.format(name="Read")], [5, PLACEHOLDER.format(name="Read")],
                                             [7, PLACEHOLDER.format(name="Read")]]]
    assert Session.load(agent.session.transcript_path).messages == agent.session.messages


def test_small_gains_are_not_worth_breaking_the_prefix(proj):
    turns = reads("a", "b") + [{"text": "done"}]
    # Past 0.6 from the start, but clearing one result frees less than min_clear_fraction of a big window.
    agent, engine, guard, _ = make(proj, turns, window=2000,
                                   config=BudgetConfig(keep_results=1, clear_at=0.1, compact_at=1.0,
                                                       min_clear_fraction=0.5))
    agent.run("read two")
    assert not any(is_placeholder(m["content"]) for r in engine.requests for m in r.messages if m["role"] == "tool")
