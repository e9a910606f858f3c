"""`agent rewind`: list a session's checkpoints; restore code, conversation, or both.

  agent rewind [--list] [-r SESSION]                  checkpoints of the latest (or given) session
  agent rewind ID [--code|--conversation|--both]      restore (default --both)
  agent rewind ID --dry-run                           what restoring the code would change

Restoring the conversation never rewrites the transcript: it appends
{"type": "rewind", "to_message_index": N, "checkpoint": ID, "ts": ...}, and the session loader keeps
only the first N messages at that point of the replay. Restoring code snapshots the current files
first, so the rewind itself can be undone with the id it prints.
"""
from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

from agent.services.checkpoints import Checkpoint, CheckpointError, Checkpoints
from agent.paths import project_key
from agent.core.transcript import Session, SessionError
from agent.paths import data_dir as default_data_dir

PROMPT_WIDTH = 70


def run_rewind(argv: list[str], project_dir: Path, data_dir: Path | None = None) -> int:
    """The `agent rewind` subcommand; prints to stdout/stderr and returns the exit code."""
    if data_dir is None:
        data_dir = default_data_dir()
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse has printed the usage error
        return int(e.code or 0)
    try:
        if args.checkpoint is None:
            return _list(args, Path(project_dir), Path(data_dir))
        if args.list:
            raise CheckpointError("give either --list or a checkpoint ID, not both")
        return _restore(args, Path(project_dir), Path(data_dir))
    except (CheckpointError, SessionError) as e:
        print(f"agent rewind: {e}", file=sys.stderr)
        return 1


def describe(c: Checkpoint) -> str:
    """One line of the checkpoint list: id, local time, kind, prompt (or label)."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(c.created))
    kind = str(c.meta.get("kind") or "-")
    text = c.meta.get("prompt") if kind == "prompt" and c.meta.get("prompt") else c.label
    text = re.sub(r"\s+", " ", str(text)).strip()
    if len(text) > PROMPT_WIDTH:
        text = text[:PROMPT_WIDTH - 3] + "..."
    extra = f"  [{len(c.skipped)} file(s) not snapshotted]" if c.skipped else ""
    return f"{c.short_id}  {when}  {kind:<7} {text}{extra}"


def conversation_cut(messages: list[dict], index: int) -> int:
    """The largest n <= index where messages[:n] leaves no tool call without its result."""
    n = max(0, min(index, len(messages)))
    while n > 0:
        calls = {c.get("id") for m in messages[:n] if m.get("role") == "assistant" for c in m.get("tool_calls") or []}
        answered = {m.get("tool_call_id") for m in messages[:n] if m.get("role") == "tool"}
        if calls <= answered:
            break
        n -= 1
    return n


def append_rewind_record(transcript: Path, to_message_index: int, checkpoint_id: str,
                         epoch: int | None = None) -> None:
    """Append-only conversation rewind: the loader keeps the first `to_message_index` messages (of `epoch`)."""
    session = Session.load(transcript)
    record = {"type": "rewind", "to_message_index": to_message_index, "checkpoint": checkpoint_id, "ts": time.time()}
    if epoch is not None:
        record["epoch"] = epoch
    try:
        session.record(record)
    finally:
        session.close()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="agent rewind", description="List checkpoints, or restore one.")
    p.add_argument("checkpoint", nargs="?", metavar="ID", help="checkpoint id (a prefix of 4+ characters)")
    p.add_argument("--list", action="store_true", help="list checkpoints (the default without ID)")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--code", dest="what", action="store_const", const="code", help="restore files only")
    what.add_argument("--conversation", dest="what", action="store_const", const="conversation",
                      help="truncate the conversation only")
    what.add_argument("--both", dest="what", action="store_const", const="both",
                      help="restore files and conversation (default)")
    p.add_argument("--dry-run", action="store_true", help="show what restoring the code would change")
    p.add_argument("-r", "--resume", metavar="SESSION_ID", help="a session other than the latest")
    return p


def _list(args: argparse.Namespace, project_dir: Path, data_dir: Path) -> int:
    transcript = _transcript(args.resume, project_dir, data_dir)
    session_id = transcript.stem
    found = Checkpoints(project_dir, data_dir=data_dir).list(session_id=session_id)
    if not found:
        print(f"No checkpoints for session {session_id}.")
        return 0
    print(f"Checkpoints of session {session_id}, newest first:")
    for c in found:
        print("  " + describe(c))
    print("Restore with: agent rewind ID [--code|--conversation|--both] (default --both)")
    return 0


def _restore(args: argparse.Namespace, project_dir: Path, data_dir: Path) -> int:
    checkpoints = Checkpoints(project_dir, data_dir=data_dir)
    target = _find(checkpoints, args.checkpoint, args.resume)
    what = args.what or "both"
    if args.dry_run:
        stat = checkpoints.diff_stat(target.id)
        print(f"Restoring {target.short_id} would change: {stat.summary()}")
        for change in stat.changes:
            print(f"  {change.action:<7} {change.path}")
        return 0
    # Check the conversation side first, so --both fails before any file is touched.
    conversation = _conversation_plan(target, project_dir, data_dir) if what != "code" else None
    if what != "conversation":
        report = checkpoints.restore_code(target.id)
        print(f"Code restored to {target.short_id}: {len(report.restored)} file(s) written, "
              f"{len(report.deleted)} deleted" + (f", {len(report.kept)} ignored file(s) kept" if report.kept else ""))
        print(f"Undo with: agent rewind {report.backup.short_id} --code")
    if conversation is not None:
        transcript, total, cut = conversation
        append_rewind_record(transcript, cut, target.id, target.meta.get("epoch"))
        print(f"Conversation of session {transcript.stem} rewound to message {cut} ({total - cut} message(s) dropped)")
        if target.meta.get("kind") == "prompt" and target.meta.get("prompt"):
            print(f"The prompt at that point was:\n  {target.meta['prompt']}")
        print(f"Continue with: agent --resume {transcript.stem}")
    return 0


def _conversation_plan(target: Checkpoint, project_dir: Path, data_dir: Path) -> tuple[Path, int, int]:
    """(transcript, messages now, messages kept) for rewinding the conversation to `target`."""
    session_id, index = target.meta.get("session_id"), target.meta.get("message_index")
    if not isinstance(session_id, str) or not isinstance(index, int) or isinstance(index, bool):
        raise CheckpointError(f"checkpoint {target.short_id} has no conversation position; use --code")
    transcript = _transcript(session_id, project_dir, data_dir)
    session = Session.load(transcript)
    epoch = target.meta.get("epoch")
    # A checkpoint taken before a compaction or rewind points into that epoch's message list.
    messages = session.messages if not isinstance(epoch, int) else session.messages_at(epoch)
    if messages is None:
        raise CheckpointError(f"checkpoint {target.short_id} refers to a conversation state this session no longer has")
    if index > len(messages):
        raise CheckpointError(f"checkpoint {target.short_id} is at message {index}, but session {session_id} "
                              f"has only {len(messages)}; it was rewound past it")
    return transcript, len(messages), conversation_cut(messages, index)


def _find(checkpoints: Checkpoints, checkpoint_id: str, session_id: str | None) -> Checkpoint:
    target = checkpoints.get(checkpoint_id)
    if session_id is not None and target.meta.get("session_id") != session_id:
        raise CheckpointError(f"checkpoint {target.short_id} does not belong to session {session_id}")
    return target


def _transcript(session_id: str | None, project_dir: Path, data_dir: Path) -> Path:
    """The transcript of `session_id` (this project's first, then any project's), or the latest one here."""
    here = data_dir / "projects" / project_key(project_dir)
    if session_id is None:
        found = sorted(here.glob("*.jsonl"), key=lambda p: p.stat().st_mtime_ns) if here.is_dir() else []
        if not found:
            raise SessionError(f"no session in {project_dir} yet")
        return found[-1]
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", session_id):
        raise SessionError(f"not a session id: {session_id!r}")
    if (here / f"{session_id}.jsonl").is_file():
        return here / f"{session_id}.jsonl"
    found = sorted((data_dir / "projects").glob(f"*/{session_id}.jsonl"))
    if not found:
        raise SessionError(f"no session {session_id} (looked under {data_dir / 'projects'})")
    return found[0]
