"""Checkpoints in a running session: a snapshot before each prompt and each file-changing tool batch,
and the in-process rewind behind `/rewind` (code, conversation, or both).

Snapshots are keyed on the project directory, the one `agent rewind` uses, so the same checkpoints
are listed in and outside the session. Their meta is {kind, prompt, session_id, message_index,
epoch, kv_tokens}: message_index is where the conversation can be cut with every tool call still
answered, epoch which message list it indexes (compaction and rewind start new ones). Restoring the
conversation appends a rewind record and cuts the message list; the next engine call then reuses the
KV cache up to the cut (longest common prefix) instead of prefilling the history again.
A failing snapshot is a warning, never an error: the session goes on without it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from agent.core import events as ev
from agent.services.checkpoints import Checkpoint, CheckpointError, Checkpoints, RestoreReport
from agent.rewind_cli import conversation_cut, describe
from tools._files import stamp_of

WHAT = ("both", "code", "conversation")
SLOW_SNAPSHOT_S = 5.0


class CheckpointRecorder:
    """EventBus subscriber: snapshots on UserPromptSubmit and on the first file-changing PreToolUse of a turn."""

    def __init__(self, agent, checkpoints: Checkpoints, warn: Callable[[str], None] | None = None) -> None:
        self.agent, self.checkpoints = agent, checkpoints
        self.warn = warn or (lambda text: None)
        self.taken: list[Checkpoint] = []  # this process's snapshots, oldest first
        self._batch_open = True  # no file-changing call has run since the last assistant turn
        self._kv_tokens = 0
        self._warned: set[str] = set()
        agent.bus.subscribe(self)

    def __call__(self, e: ev.Event) -> None:
        if e.session_id and e.session_id != self.agent.session.session_id:
            return  # a subagent's events
        if isinstance(e, ev.UserPromptSubmit):
            self.snapshot("prompt", e.prompt)
            self._batch_open = True
        elif isinstance(e, ev.AssistantTurn):
            self._batch_open = True
        elif isinstance(e, ev.TurnUsage) and e.usage.prompt_tokens:
            self._kv_tokens = e.usage.prompt_tokens + e.usage.generated_tokens
        elif isinstance(e, ev.PreToolUse) and self._batch_open:
            tool = self.agent.tools.get(e.tool_name)
            if tool is not None and not tool.read_only:  # Bash counts: it may rm, mv or generate files
                self._batch_open = False
                self.snapshot("tool", f"before {e.tool_name}")

    def snapshot(self, kind: str, text: str) -> Checkpoint | None:
        session = self.agent.session
        meta = {"kind": kind, "prompt": text if kind == "prompt" else "", "session_id": session.session_id,
                "message_index": conversation_cut(session.messages, len(session.messages)),
                "epoch": session.epoch, "kv_tokens": self.kv_tokens()}
        label = text if kind == "prompt" else f"{text} (turn {self.agent.turn})"
        try:
            cp = self.checkpoints.snapshot(label, meta)
        except (CheckpointError, OSError) as e:  # e.g. the data directory is not writable
            if str(e) not in self._warned:  # once per distinct problem, not before every step
                self._warned.add(str(e))
                self.warn(f"warning: checkpoint not taken: {e}")
            return None
        if cp.duration_s > SLOW_SNAPSHOT_S and "slow" not in self._warned:
            self._warned.add("slow")
            self.warn(f"warning: checkpoints are slow here ({cp.duration_s:.1f}s a snapshot); set "
                      f'"checkpoints": false in settings to turn them off')
        self.taken.append(cp)
        return cp

    def kv_tokens(self) -> int:
        """Tokens of this session in the engine's KV cache now (exact for the local engine)."""
        tokens = getattr(self.agent.engine, "session_tokens", None)
        if tokens is not None:
            return len(tokens(self.agent.session.session_id))
        return self._kv_tokens

    def list(self) -> list[Checkpoint]:
        """This session's checkpoints, newest first."""
        return self.checkpoints.list(session_id=self.agent.session.session_id)


@dataclass
class RewindOutcome:
    checkpoint: Checkpoint
    what: str
    code: RestoreReport | None = None
    messages_before: int = 0
    messages_after: int | None = None  # None: the conversation was left alone

    def describe(self) -> str:
        c = self.checkpoint
        lines = []
        if self.code is not None:
            r = self.code
            lines.append(f"Code restored to {c.short_id}: {len(r.restored)} file(s) written, {len(r.deleted)} deleted"
                         + (f", {len(r.kept)} ignored file(s) kept" if r.kept else "")
                         + f". Undo with `/rewind {r.backup.short_id} code`.")
        if self.messages_after is not None:
            lines.append(f"Conversation rewound to message {self.messages_after} "
                         f"({self.messages_before - self.messages_after} message(s) dropped).")
        if c.meta.get("kind") == "prompt" and c.meta.get("prompt"):
            lines.append(f"The prompt at that point was: {c.meta['prompt']}")
        return "\n".join(lines)


def rewind(agent, checkpoints: Checkpoints, checkpoint_id: str, what: str = "both") -> RewindOutcome:
    """Restore code, conversation or both to a checkpoint of this session; CheckpointError (one line) if not."""
    if what not in WHAT:
        raise CheckpointError(f"restore what? {what!r}; expected one of {', '.join(WHAT)}")
    session, ctx = agent.session, agent.ctx
    target = checkpoints.get(checkpoint_id)
    cut = source_epoch = None
    if what != "code":  # checked first, so "both" fails before any file is touched
        if target.meta.get("session_id") != session.session_id:
            raise CheckpointError(f"checkpoint {target.short_id} belongs to another session; restore its code "
                                  f"with `/rewind {target.short_id} code`")
        index, source_epoch = target.meta.get("message_index"), target.meta.get("epoch", session.epoch)
        source = session.messages_at(source_epoch) if isinstance(source_epoch, int) else None
        if not isinstance(index, int) or source is None or index > len(source):
            raise CheckpointError(f"checkpoint {target.short_id} has no conversation position in this session; "
                                  f"restore its code only")
        cut = conversation_cut(source, index)
    outcome = RewindOutcome(target, what, messages_before=len(session.messages))
    if what != "conversation":
        outcome.code = checkpoints.restore_code(target.id, backup_meta={
            "session_id": session.session_id, "message_index": len(session.messages), "epoch": session.epoch})
    if cut is not None:
        kept = session.messages_at(source_epoch)[:cut]
        session.replace_messages(kept, {"type": "rewind", "to_message_index": cut, "epoch": source_epoch,
                                        "checkpoint": target.id, "ts": time.time()}, source_epoch=source_epoch)
        ctx.todos[:] = session.last_todos()
        known = _files_in(kept, ctx)
        for path in [p for p in ctx.read_files if p not in known]:
            del ctx.read_files[path]  # read after the cut: the model no longer remembers reading it
        if getattr(agent, "context", None) is not None:
            agent.context.shown_todos = [dict(t) for t in ctx.todos]
        if outcome.code is not None:  # files and conversation are both as they were: what was read is current
            for rel in outcome.code.restored:
                path = str(ctx.resolve(str(checkpoints.project_dir / rel)))
                if path in ctx.read_files:
                    ctx.read_files[path] = stamp_of(Path(path))
        outcome.messages_after = cut
    return outcome


def _files_in(messages: list[dict], ctx) -> set[str]:
    out = set()
    for m in messages:
        for c in m.get("tool_calls") or []:
            args = (c.get("function") or {}).get("arguments")
            if isinstance(args, dict) and isinstance(args.get("file_path"), str):
                out.add(str(ctx.resolve(args["file_path"])))
    return out


def checkpoints_for(project: Path, warn: Callable[[str], None]) -> Checkpoints | None:
    """The project's checkpoint store, or None (with a warning) where snapshots would be unwise or impossible."""
    project = Path(project).resolve()
    if project in (Path.home().resolve(), Path(project.anchor)):
        warn(f"warning: checkpoints are off in {project} (the home or root directory: too much to snapshot)")
        return None
    try:
        return Checkpoints(project)
    except CheckpointError as e:
        warn(f"warning: checkpoints are off: {e}")
        return None


def format_list(found: list[Checkpoint]) -> str:
    if not found:
        return "No checkpoints in this session yet."
    rows = [f"- `{describe(c)}`" for c in found]
    return "\n".join(["Checkpoints of this session, newest first:", *rows, "",
                      "Restore with `/rewind ID [both|code|conversation]` (default both)."])
