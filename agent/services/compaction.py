"""Compaction: the history becomes one structured state block, keeping the system prompt's KV.

compact() runs the PreCompact hook, asks the model (same session, so its whole history is reused
from the KV cache and only the request is prefilled) for the parts only it can write (goal,
decisions, failed approaches, next step), and builds the rest programmatically, never trusting the
model to copy them: the user's instructions verbatim, the files touched (from the tool calls), recent
tool errors and the todo list (TodoWrite state). The new history is [system, state message]: the
system prompt and tools are untouched, so the engine keeps their KV and prefills only the state
message, which starts with the first message's memory block (also shared) and ends with the most
recently read files re-attached within a budget. The transcript gets an append-only "compaction"
record, so --continue/--resume restore the compacted state.

ContextGuard runs before each engine call: past `clear_at` it clears stale tool results, past
`compact_at` it compacts (trigger "auto"); reports go to `notify` and the bus.
"""
from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from agent.core import events as ev
from agent.services.context_budget import BudgetConfig, TokenMeter, plan_clearing
from agent.core.model_text import leading_blocks
from agent.services.state_block import collect_instructions, parse_summary, reattach, render_state
from runtime import api

SUMMARY_PROMPT = """\
The conversation so far is about to be replaced by a summary, to free context. Write that summary for \
yourself, to continue the work from it. Use exactly these four sections, each with a few short bullet \
points, facts only (say what was verified and what was only assumed):
## Goal
What the user wants done.
## Decisions
What was decided or done, and where (files, functions).
## Failed approaches
What was tried and did not work, and why, so it is not repeated ("None" if nothing failed).
## Next step
The very next thing to do.
Do not call tools. The user's instructions, the files touched and the todo list are kept separately."""
CONTINUE = "Continue the work from the next step above; the last user instruction is the current request."


class CompactionError(Exception):
    """Compaction cannot run or was stopped; the message is one line."""


@dataclass
class CompactionReport:
    trigger: str  # "auto" | "manual"
    messages_before: int
    tokens_before: int
    tokens_after: int
    kept_prefix_tokens: int  # system prompt + tools (+ memory): their KV survives
    summary_usage: api.Usage  # the model's summary call (its history came from the KV cache)
    summarized: bool  # False: the state block was built without the model's summary
    reattached: list[str] = field(default_factory=list)
    instructions: int = 0
    note: str = ""  # why the model's summary is missing, if it is

    @property
    def next_prefill(self) -> int:
        """Tokens the next engine call prefills (estimate): the state message and what follows."""
        return max(0, self.tokens_after - self.kept_prefix_tokens)

    def describe(self) -> str:
        u = self.summary_usage
        files = f"; re-attached {', '.join(self.reattached)}" if self.reattached else ""
        summary = (f"summary call reused {u.reused_tokens} cached tokens, prefilled {u.prefilled_tokens}, "
                   f"generated {u.generated_tokens}" if self.summarized else f"no model summary ({self.note})")
        return (f"Compacted ({self.trigger}) {self.messages_before} messages: {self.tokens_before} -> "
                f"{self.tokens_after} tokens; {summary}; the next call prefills ~{self.next_prefill} tokens "
                f"({self.kept_prefix_tokens} of system prompt and tools stay cached){files}.")


@dataclass(kw_only=True)
class ContextCompacted(ev.Event):
    report: CompactionReport


@dataclass(kw_only=True)
class ToolResultsCleared(ev.Event):
    count: int
    tokens_before: int
    tokens_after: int
    prefill_tokens: int  # the prompt from the first cleared result on is prefilled again

    def describe(self) -> str:
        return (f"Cleared {self.count} old tool results: {self.tokens_before} -> {self.tokens_after} tokens; "
                f"the next call prefills {self.prefill_tokens} tokens from the first cleared result on.")


def compact(agent, meter: TokenMeter, config: BudgetConfig, *, trigger: str, focus: str = "",
            cancel: threading.Event | None = None, resume_work: bool = False) -> CompactionReport:
    """Replace the agent's history with [system, state message]; CompactionError when it cannot."""
    session, ctx = agent.session, agent.ctx
    messages = list(session.messages)
    if not any(m.get("role") == "user" for m in messages):
        raise CompactionError("there is nothing to compact yet")
    d = agent.emit(ev.PreCompact(trigger=trigger, custom_instructions=focus))
    if d.behavior == "block" or d.stop_session:  # a hook's `"continue": false`
        raise CompactionError(f"a PreCompact hook stopped compaction: {d.stop_reason or d.reason or 'no reason given'}")
    tokens_before = meter.total(session.messages, agent.schemas)
    request = "\n\n".join(x for x in (SUMMARY_PROMPT, f"Focus the summary on: {focus}" if focus else "",
                                      d.additional_context) if x)
    text, usage, note = _summarize(agent, meter, config, messages, request, tokens_before, cancel)
    window = agent.engine.context_window
    system = [messages[0]] if messages[0].get("role") == "system" else []
    lead = leading_blocks(next((m["content"] for m in messages if m.get("role") == "user"), ""))
    block = render_state(trigger, messages, parse_summary(text), ctx, meter,
                         int(config.instructions_fraction * window))
    ctx.read_files.clear()  # the model no longer holds those files' text: Edit asks for a Read again
    attached, names = reattach(messages, ctx, meter, int(config.reattach_fraction * window), config.reattach_files)
    content = "\n\n".join(x for x in (lead, block, *attached, CONTINUE if resume_work else "") if x)
    new = system + [{"role": "user", "content": content}]
    report = CompactionReport(trigger, len(messages), tokens_before, meter.tools(agent.schemas) + meter.messages(new),
                              meter.tools(agent.schemas) + meter.messages(system) + meter.count(lead),
                              usage, bool(text.strip()), names, len(collect_instructions(messages)), note)
    session.replace_messages(new, {
        "type": "compaction", "trigger": trigger, "focus": focus, "messages": new, "todos": ctx.todos,
        "tokens_before": tokens_before, "tokens_after": report.tokens_after, "summarized": report.summarized,
        "summary_usage": dataclasses.asdict(usage), "reattached": names, "ts": time.time()}, todos=ctx.todos)
    if getattr(agent, "context", None) is not None:
        agent.context.shown_todos = [dict(t) for t in ctx.todos]  # the state block shows them
    meter.invalidate()
    agent.emit(ContextCompacted(report=report))
    return report


def _summarize(agent, meter: TokenMeter, config: BudgetConfig, messages: list[dict], request: str,
               tokens_before: int, cancel: threading.Event | None) -> tuple[str, api.Usage, str]:
    """The model's summary: (text, usage of the call, why it is missing)."""
    window = agent.engine.context_window
    ask = {"role": "user", "content": request}
    history = messages
    room = window - tokens_before - meter.message(ask)
    if room < min(config.summary_tokens, 256):  # too full to answer: summarize without old results
        plan = plan_clearing(messages, meter, keep=0)
        history = list(messages)
        for i, text in plan.edits:
            history[i] = {**history[i], "content": text}
        room += plan.freed
        if room < min(config.summary_tokens, 256):
            return "", api.Usage(), "the history is too long for the model to summarize"
    sampling = dataclasses.replace(agent.config.sampling, max_tokens=max(1, min(config.summary_tokens, room)))
    req = api.Request(agent.session.session_id, history + [ask], agent.schemas, sampling,
                      speculation=agent.config.speculation)
    parts: list[str] = []
    done = None
    try:
        for e in agent.engine.stream(req, cancel=cancel):
            if isinstance(e, api.TextDelta):
                parts.append(e.text)
            elif isinstance(e, api.Progress):
                agent.emit(ev.EngineProgress(what=f"compacting ({e.what})", done=e.done, total=e.total))
            elif isinstance(e, api.Done):
                done = e
    except Exception as e:  # an engine failure leaves a state block without the model's part
        return "", api.Usage(), f"the engine failed: {type(e).__name__}: {e}"
    if (cancel is not None and cancel.is_set()) or (done is not None and done.stop_reason == "cancelled"):
        raise CompactionError("interrupted; the conversation was not compacted")
    if done is None or done.stop_reason in ("error", "context_full"):
        why = (done.error if done else None) or (done.stop_reason if done else "no Done event")
        return "", done.usage if done else api.Usage(), f"the summary call failed: {why}"
    text = "".join(parts).strip()
    if text.startswith("{") and '"name"' in text[:40]:  # a small model's bare-JSON tool call, not a summary
        return "", done.usage, "the model answered with a tool call"
    return text, done.usage, "" if text else "the model wrote no summary"


class ContextGuard:
    """Before each engine call: clear stale tool results past clear_at, compact past compact_at."""

    def __init__(self, agent, config: BudgetConfig, notify: Callable[[str], None] | None = None) -> None:
        self.agent, self.config = agent, config
        self.notify = notify or (lambda text: None)
        self.meter = TokenMeter(lambda text: _count(agent.engine, text))
        self.last_report: CompactionReport | None = None
        self._busy = False
        self._after_compaction: tuple[int, int] | None = None  # (epoch, length) right after the last one
        self._report_next_call = False
        self._engine = agent.engine
        agent.bus.subscribe(self._on_event)
        agent.before_query.append(self.before_query)
        agent.on_context_full = self.on_context_full

    @property
    def window(self) -> int:
        return int(self.agent.engine.context_window)

    def tokens(self) -> int:
        if self._engine is not self.agent.engine:  # /model switched it: another tokenizer
            self._engine = self.agent.engine
            self.meter = TokenMeter(lambda text: _count(self.agent.engine, text))
        return self.meter.total(self.agent.session.messages, self.agent.schemas)

    def action(self, tokens: int) -> str:
        """What `tokens` in the next prompt calls for: "compact", "clear" or "none"."""
        if self.config.auto_compact and tokens >= self.config.compact_at * self.window:
            return "compact"
        return "clear" if tokens >= self.config.clear_at * self.window else "none"

    def before_query(self, agent, cancel: threading.Event) -> None:
        tokens = self.tokens()
        if tokens >= self.config.clear_at * self.window and self.clear():  # cheaper, and may be enough
            tokens = self.tokens()
        if self.action(tokens) == "compact":
            self._auto_compact(cancel)

    def on_context_full(self, agent, cancel: threading.Event) -> bool:
        """The engine refused the prompt as too long: compact and let the loop retry (once per growth)."""
        return self.config.auto_compact and self._auto_compact(cancel)

    def clear(self) -> bool:
        """Clear stale tool results if that frees at least min_clear_fraction of the window."""
        session = self.agent.session
        plan = plan_clearing(session.messages, self.meter, self.config.keep_results)
        if not plan.edits or plan.freed < self.config.min_clear_fraction * self.window:
            return False
        before = self.tokens()
        after = list(session.messages)
        for i, text in plan.edits:
            after[i] = {**after[i], "content": text}
        e = ToolResultsCleared(count=plan.count, tokens_before=before, tokens_after=self.meter.total(after, self.agent.schemas),
                               prefill_tokens=self.meter.messages(after[plan.first:]))
        session.clear_results(plan.edits, {"tokens_before": e.tokens_before, "tokens_after": e.tokens_after,
                                           "prefill_tokens": e.prefill_tokens})
        self.meter.invalidate()
        self.agent.emit(e)
        self.notify(e.describe())
        return True

    def compact(self, *, trigger: str = "manual", focus: str = "", cancel: threading.Event | None = None,
                resume_work: bool = False) -> CompactionReport:
        self._busy = True
        try:
            report = compact(self.agent, self.meter, self.config, trigger=trigger, focus=focus, cancel=cancel,
                             resume_work=resume_work)
        finally:
            self._busy = False
        self.last_report = report
        self._after_compaction = (self.agent.session.epoch, len(self.agent.session.messages))
        self._report_next_call = True
        self._session_start_hooks()
        return report

    def _session_start_hooks(self) -> None:
        """SessionStart with source "compact", as Claude Code's hooks expect; their context joins the next prompt."""
        a = self.agent
        d = a.emit(ev.SessionStart(source="compact", cwd=str(a.ctx.cwd), transcript_path=str(a.session.transcript_path),
                                   permission_mode=getattr(a.permissions, "mode", "default"),
                                   model=getattr(a.engine, "name", ""), tools=list(a.tools)))
        if d.additional_context:
            a.pending_context = "\n".join(x for x in (a.pending_context, d.additional_context) if x)

    def _auto_compact(self, cancel: threading.Event) -> bool:
        s = self.agent.session
        if self._after_compaction == (s.epoch, len(s.messages)):
            return False  # nothing new since the last compaction: doing it again would not help
        try:
            report = self.compact(trigger="auto", cancel=cancel, resume_work=True)
        except CompactionError as e:
            self.notify(f"Auto-compaction skipped: {e}")
            return False
        self.notify(report.describe())
        return True

    def _on_event(self, e: ev.Event) -> None:
        session = self.agent.session
        if not isinstance(e, ev.TurnUsage) or self._busy or e.session_id != session.session_id:
            return
        if e.usage.prompt_tokens:
            self.meter.anchor(session.messages, e.usage.prompt_tokens + e.usage.generated_tokens)
        if self._report_next_call:
            self._report_next_call = False
            u = e.usage
            self.notify(f"First call after compaction: {u.reused_tokens} tokens reused from the KV cache, "
                        f"{u.prefilled_tokens} prefilled.")


def _count(engine, text: str) -> int:
    counter = getattr(engine, "count_tokens", None)
    return counter(text) if counter else max(1, len(text) // 4) if text else 0
