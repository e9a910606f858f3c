"""How each tool call looks in the transcript: a one-line header and a compact body (Rich renderables).

Read: path and lines. Edit/Write/MultiEdit: a unified diff, code coloured by pygments (through
rich.syntax) on red/green rows. Bash: command, exit code and duration (its output is made
collapsible by the widget). TodoWrite: a checklist. Task: the subagent and its report.
"""
from __future__ import annotations

import json
import re

from rich.console import Group, RenderableType
from rich.syntax import Syntax
from rich.text import Text

from tools.base import ToolResult

MAX_DIFF_LINES = 60
MAX_ARG_CHARS = 120
ADDED_BG, REMOVED_BG = "on #12361c", "on #4a1518"
_HUNK = re.compile(r"@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")
_NUMBERED = re.compile(r"^ *\d+\t", re.MULTILINE)
_BASH_TAIL = re.compile(r"\n?\[(exit code -?\d+, [\d.]+s|Timed out after .*|Cancelled by the user.*)\]\n?\Z")


def _short(text: str, limit: int = MAX_ARG_CHARS) -> str:
    text = " ".join(str(text).split()) if "\n" not in str(text) else str(text).splitlines()[0] + " …"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def header(name: str, args: dict) -> Text:
    """`Read(src/app.py · lines 10-40)`, `Bash(make test)`: the tool and what it acts on."""
    if name == "Read":
        what = str(args.get("file_path", ""))
        if args.get("offset") or args.get("limit"):
            first = int(args.get("offset") or 1)
            what += f" · lines {first}-{first + int(args['limit']) - 1}" if args.get("limit") else f" · from line {first}"
    elif name in ("Write", "Edit", "MultiEdit"):
        what = str(args.get("file_path", ""))
    elif name == "Bash":
        what = str(args.get("command", ""))
    elif name == "Grep":
        what = f"{args.get('pattern', '')}" + (f" in {args['path']}" if args.get("path") else "")
    elif name == "Glob":
        what = str(args.get("pattern", "")) + (f" in {args['path']}" if args.get("path") else "")
    elif name == "LS":
        what = str(args.get("path", "."))
    elif name == "TodoWrite":
        what = "update todos"
    elif name == "Task":
        what = f"{args.get('description', '')} [{args.get('subagent_type', 'general-purpose')}]"
    else:
        what = json.dumps(args, ensure_ascii=False)
    out = Text()
    out.append(name, style="bold")
    out.append("(" + _short(what) + ")")
    return out


def body(name: str, args: dict, result: ToolResult) -> RenderableType:
    """The summary under the header once the call has a result (Bash output is added by the widget)."""
    data = result.data or {}
    if result.is_error and not (name == "Bash" and "exit_code" in data):
        lines = result.content.strip().splitlines() or [""]
        more = f"\n… {len(lines) - 6} more lines" if len(lines) > 6 else ""
        return Text("\n".join(lines[:6]) + more, style="red")
    if name == "Read":
        n = len(_NUMBERED.findall(result.content))
        return Text(f"Read {n} line{'s' * (n != 1)}" if n or "kind" not in data else result.content.strip(),
                    style="dim")
    if name in ("Write", "Edit", "MultiEdit"):
        diff = data.get("diff")
        if not diff:
            return Text(result.content.strip().splitlines()[0] if result.content.strip() else "done", style="dim")
        added, removed = _diff_counts(diff)
        summary = Text(f"{'Created' if data.get('created') else 'Updated'} {args.get('file_path', '')}: "
                       f"{added} addition{'s' * (added != 1)}, {removed} removal{'s' * (removed != 1)}", style="dim")
        return Group(summary, render_diff(diff, str(args.get("file_path", ""))))
    if name == "Bash":
        return bash_status(result)
    if name == "TodoWrite":
        return checklist(args.get("todos") or data.get("todos") or [])
    lines = result.content.strip().splitlines()
    if name in ("Grep", "Glob", "LS"):
        return Text(lines[0] if len(lines) == 1 else f"{len(lines)} lines of results", style="dim")
    if name == "Task":
        return Text(f"Done: {_short(lines[0] if lines else '')}", style="dim")
    return Text("\n".join(lines[:5]) + (f"\n… {len(lines) - 5} more lines" if len(lines) > 5 else ""), style="dim")


def bash_status(result: ToolResult) -> Text:
    data = result.data or {}
    if data.get("cancelled"):
        return Text("interrupted", style="yellow")
    if data.get("timed_out"):
        return Text("timed out", style="red")
    if data.get("background"):
        return Text(f"running in the background as {data.get('shell_id')} (/bashes)", style="dim")
    code = data.get("exit_code")
    if code is None:  # a resumed transcript keeps the text only
        tail = _BASH_TAIL.search(result.content)
        return Text(tail.group(1) if tail else "done", style="dim")
    duration = data.get("duration_ms", 0) / 1000
    return Text(f"exit {code} · {duration:.2f}s", style="green" if code == 0 else "red")


def bash_output(result: ToolResult) -> str:
    """Bash's output without the status line the tool appends for the model."""
    return _BASH_TAIL.sub("", result.content).rstrip("\n")


def checklist(todos: list[dict]) -> Text:
    out = Text()
    for i, t in enumerate(todos):
        status = t.get("status")
        if status == "completed":
            out.append("☒ " + str(t.get("content", "")), style="dim strike")
        elif status == "in_progress":
            out.append("◼ " + str(t.get("activeForm") or t.get("content", "")), style="bold")
        else:
            out.append("☐ " + str(t.get("content", "")))
        if i < len(todos) - 1:
            out.append("\n")
    return out


def _diff_counts(diff: str) -> tuple[int, int]:
    lines = diff.splitlines()
    added = sum(1 for ln in lines if ln.startswith("+") and not ln.startswith("+++"))
    removed = sum(1 for ln in lines if ln.startswith("-") and not ln.startswith("---"))
    return added, removed


def render_diff(diff: str, path: str) -> Text:
    """A unified diff as numbered rows: code coloured for its language, added/removed rows on green/red."""
    lexer = Syntax.guess_lexer(path or "x.txt")
    syntax = Syntax("", lexer, theme="monokai", background_color="default")
    out = Text()
    old_no = new_no = 0
    shown = 0
    rows = [ln for ln in diff.splitlines() if not ln.startswith(("---", "+++"))]
    for ln in rows:
        if shown == MAX_DIFF_LINES:
            out.append(f"… {len(rows) - shown} more diff lines\n", style="dim")
            break
        shown += 1
        hunk = _HUNK.match(ln)
        if hunk:
            old_no, new_no = int(hunk.group(1)), int(hunk.group(2))
            if shown > 1:
                out.append("   ⋮\n", style="dim")
            continue
        if ln.startswith("\\"):
            continue  # "\ No newline at end of file"
        mark, code = (ln[:1], ln[1:]) if ln else (" ", "")
        code_text = syntax.highlight(code)
        code_text.rstrip()
        if mark == "+":
            row = Text.styled(f"{new_no:>4} + ", "green")
            new_no += 1
            bg = ADDED_BG
        elif mark == "-":
            row = Text.styled(f"{old_no:>4} - ", "red")
            old_no += 1
            bg = REMOVED_BG
        else:
            row = Text.styled(f"{new_no:>4}   ", "dim")
            old_no += 1
            new_no += 1
            bg = None
        row.append_text(code_text)
        if bg:
            row.stylize(bg)
        out.append_text(row)
        out.append("\n")
    out.rstrip()
    return out
