"""The state block that replaces a compacted history, built from the messages and the tool state.

Everything here is programmatic except the model's sections (parse_summary): the user's instructions
verbatim (collect_instructions, carried forward from earlier state blocks), the files touched and
recent tool errors (from the tool calls and results), the todo list (TodoWrite state), the memory
lead of the first message (leading_blocks) and the re-attached files (reattach).
"""
from __future__ import annotations

import re

from agent.core import model_text as mt
from agent.core.model_text import STATE_CLOSE, STATE_OPEN
from agent.services.context_budget import TokenMeter
from agent.core.context import render_todos
from tools._files import display_path
from tools.read import ReadTool

SECTIONS = ("Goal", "Decisions", "Failed approaches", "Next step")


_HEADING = re.compile(r"^[ \t]*(?:#{1,6}[ \t]*)?(?:\*\*)?[ \t]*(goal|decisions?|failed approaches|next steps?)"
                      r"[ \t]*(?:\*\*)?[ \t]*:?[ \t]*(?:\*\*)?[ \t]*(.*)$", re.IGNORECASE | re.MULTILINE)


def parse_summary(text: str) -> dict[str, str]:
    """The model's sections by name (Goal, Decisions, Failed approaches, Next step); else {"Summary": text}."""
    found = list(_HEADING.finditer(text))
    if not found:
        return {"Summary": text.strip()} if text.strip() else {}
    out: dict[str, str] = {}
    for k, m in enumerate(found):
        end = found[k + 1].start() if k + 1 < len(found) else len(text)
        body = "\n".join(x for x in (m.group(2).strip(), text[m.end():end].strip()) if x)
        name = next(s for s in SECTIONS if s.lower().startswith(m.group(1).lower()[:6]))
        out[name] = "\n".join(x for x in (out.get(name, ""), body) if x)
    return out


def render_state(trigger: str, messages: list[dict], summary: dict[str, str], ctx, meter: TokenMeter,
                 instruction_budget: int) -> str:
    instructions = collect_instructions(messages)
    kept, total = [], 0
    for text in reversed(instructions):  # the most recent first: they matter most when the budget is short
        total += meter.count(text) + 4
        if kept and total > instruction_budget:
            break
        kept.insert(0, text)
    dropped = len(instructions) - len(kept)
    files = files_touched(messages, ctx)
    errors = tool_errors(messages)
    out = [STATE_OPEN, f"The conversation so far was compacted ({trigger}) into this state block; it replaces "
                       f"{len(messages)} earlier messages."]
    out += ["## Goal", summary.get("Goal") or "(see the user's instructions below)"]
    out.append("## User instructions (verbatim, oldest first)")
    if dropped:
        out.append(f"({dropped} earlier instructions did not fit and were left out)")
    out += [mt.instruction_block(text) for text in kept]
    out += ["## Files touched", "\n".join(f"- {p} ({', '.join(a)})" for p, a in files.items()) or "None."]
    for name in ("Summary", "Decisions", "Failed approaches"):
        if summary.get(name):
            out += [f"## {name}", summary[name]]
    if errors:
        out += ["## Recent tool errors", "\n".join(errors)]
    out += ["## Todo list", render_todos(ctx.todos) if ctx.todos else "None."]
    out += ["## Next step", summary.get("Next step") or "(not recorded: check the todo list and the instructions)"]
    return "\n".join(out + [STATE_CLOSE])


_FILE_LINE = re.compile(r"^- (.+) \(([a-z, ]+)\)$", re.MULTILINE)


def collect_instructions(messages: list[dict]) -> list[str]:
    """What the user typed, verbatim and in order (earlier state blocks included), without harness notes."""
    out: list[str] = []
    for m in messages:
        content = m.get("content")
        if m.get("role") != "user" or not isinstance(content, str):
            continue
        kept = mt.state_instructions(content)
        if kept is not None:
            out += kept
            continue
        if mt.is_internal(content):
            continue
        text = mt.user_text(content).strip()
        if text:
            out.append(text)
    return out


_ACTIONS = {"Read": "read", "Write": "written", "Edit": "edited", "MultiEdit": "edited"}


def files_touched(messages: list[dict], ctx) -> dict[str, list[str]]:
    """path -> actions, from the file tools' calls (and earlier state blocks), most recently touched last."""
    found: dict[str, list[str]] = {}

    def add(path: str, action: str) -> None:
        actions = found.pop(path, [])
        found[path] = actions + [action] if action not in actions else actions

    for m in messages:
        content = m.get("content")
        if m.get("role") == "user" and isinstance(content, str) and STATE_OPEN in content:
            section = content.split("## Files touched", 1)[-1].split("\n## ", 1)[0]
            for path, actions in _FILE_LINE.findall(section):
                for a in actions.split(", "):
                    add(path, a)
        for c in m.get("tool_calls") or []:
            fn = c.get("function") or {}
            path = (fn.get("arguments") or {}).get("file_path") if isinstance(fn.get("arguments"), dict) else None
            if fn.get("name") in _ACTIONS and isinstance(path, str) and path:
                add(display_path(ctx, ctx.resolve(path)), _ACTIONS[fn["name"]])
    return found


_EXIT = re.compile(r"\[exit code (-?\d+),")


def tool_errors(messages: list[dict], limit: int = 6) -> list[str]:
    """The last few failed tool calls, one line each: `- Bash `make test`: exit code 2`."""
    calls = {c.get("id"): c.get("function") or {} for m in messages for c in m.get("tool_calls") or []}
    out = []
    for m in messages:
        if m.get("role") != "tool":
            continue
        text = str(m.get("content") or "")
        code = _EXIT.findall(text)
        failed = text.startswith("Error") or (code and code[-1] != "0")
        if not failed:
            continue
        fn = calls.get(m.get("tool_call_id"), {})
        args = fn.get("arguments") if isinstance(fn.get("arguments"), dict) else {}
        subject = args.get("command") or args.get("file_path") or args.get("pattern") or ""
        what = f"exit code {code[-1]}" if code and code[-1] != "0" else text.splitlines()[0][:160]
        out.append(f"- {fn.get('name') or m.get('name')} `{str(subject)[:80]}`: {what}")
    return out[-limit:]


def reattach(messages: list[dict], ctx, meter: TokenMeter, budget: int, max_files: int) -> tuple[list[str], list[str]]:
    """The most recently read or changed files, read again (so they count as read), within `budget` tokens."""
    recent: list[str] = []
    for m in reversed(messages):
        for c in reversed(m.get("tool_calls") or []):
            fn = c.get("function") or {}
            args = fn.get("arguments") if isinstance(fn.get("arguments"), dict) else {}
            if fn.get("name") in _ACTIONS and isinstance(args.get("file_path"), str):
                path = str(ctx.resolve(args["file_path"]))
                if path not in recent:
                    recent.append(path)
    blocks, names, used = [], [], 0
    for path in recent:
        if len(names) >= max_files:
            break
        if not ctx.resolve(path).is_file():
            continue
        result = ReadTool().run({"file_path": path}, ctx)
        name = display_path(ctx, ctx.resolve(path))
        block = mt.attached_file(name, result.content)
        cost = meter.count(block)
        if result.is_error or used + cost > budget:
            ctx.read_files.pop(path, None)  # not shown to the model, so not "read"
            continue
        used += cost
        blocks.append(block)
        names.append(name)
    return blocks, names
