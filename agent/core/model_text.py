"""Every block of model-visible text the harness writes into user messages, and the parsers that read them back.

No other module writes these tags: the first user message's lead (<memory>, <skills>, <agents>, <env>),
<todos>, <context>, <attached-file>, <system-reminder>, <subagent>, the compacted state and its
<instruction> blocks, the request reminder and the repeated-read note. A change of wording here is a
change of what the model sees, so it is one place to review.
"""
from __future__ import annotations

import re

LEAD_TAGS = ("memory", "skills", "agents", "env", "todos", "context")  # blocks that open a user message
STATE_OPEN, STATE_CLOSE = "<compacted-state>", "</compacted-state>"
REMINDER_OPEN, REMINDER_CLOSE = "<system-reminder>", "</system-reminder>"
STOP_HOOK_PREFIX = "Stop hook feedback:"
INTERNAL_PREFIXES = (STOP_HOOK_PREFIX, REMINDER_OPEN)  # harness notes in user messages: never the user's words
REMINDER_CHARS = 600  # a longer request is cut in the reminder (its full text is earlier in the context)


def block(tag: str, body: str) -> str:
    return f"<{tag}>\n{body}\n</{tag}>"


def memory_block(memory: str) -> str:
    return block("memory", memory)


def env_block(facts: str) -> str:
    return block("env", facts)


def todos_block(rendered: str) -> str:
    return block("todos", rendered)


def context_block(extra: str) -> str:
    return block("context", extra)


def skills_index_block(index: str) -> str:
    return block("skills", f"Skills you can load with the Skill tool when a task matches:\n{index}")


def agents_index_block(index: str) -> str:
    return block("agents", f"Subagent types for the Task tool:\n{index}")


def attached_file(name: str, content: str) -> str:
    """A file's Read output attached to a prompt (`@path`) or re-attached after compaction."""
    return f'<attached-file path="{name}">\n{content}\n</attached-file>'


def system_reminder(text: str) -> str:
    return f"{REMINDER_OPEN}\n{text}\n{REMINDER_CLOSE}"


def stop_hook_feedback(reason: str) -> str:
    return f"{STOP_HOOK_PREFIX}\n{reason}"


def subagent_prompt(type_name: str, system_prompt: str, prompt: str) -> str:
    """A child's first prompt: its definition's instructions, then the job."""
    return f'<subagent type="{type_name}">\n{system_prompt}\n</subagent>\n\n{prompt}'


def instruction_block(text: str) -> str:
    return block("instruction", text)


def request_reminder(prompt: str, *, after_errors: bool = False) -> str:
    """The user turn that follows a round of tool results when the profile restates the request.

    after_errors: every call of the round failed or was refused; then it asks for the next call instead of
    offering an answer, which small models took as leave to explain a change in prose (docs/EVALS.md)."""
    if after_errors:
        return f"{restate(prompt)}\nThe last call did not succeed; fix it and call a tool again."
    return f"{restate(prompt)}\nIf you can answer it now, answer in plain text."


def test_runner(command: str) -> str:
    """How the project's tests run, ahead of a request to run them (the 1.5B ran `unittest discover` on pytest
    tests and reported 0 tests as a failure)."""
    return f"This project's tests run with `{command}`."


def restate(prompt: str) -> str:
    """The user's request again, close to where the model answers (cut when long: the full text is earlier)."""
    request = prompt.strip()
    if len(request) > REMINDER_CHARS:
        request = request[:REMINDER_CHARS].rstrip() + " [...]"
    return f"Reminder of the user's request: {request}"


def repeated_read_note(data: dict) -> str:
    """The result of a first identical repeat of a Read (data: the first Read's ToolResult.data)."""
    note = "You have this file's content above (unchanged); change it with Edit (old_string copied from it) or answer."
    last = data.get("start_line", 1) + data.get("num_lines", 0) - 1
    if last < data.get("total_lines", 0):
        note += f" It showed lines {data.get('start_line', 1)}-{last} of {data['total_lines']}; Read offset={last + 1} for more."
    return note


# ---- the task pipeline's steps (agent/pipeline): whole files as raw text in fenced blocks

FENCE_LANG = {".py": "python", ".json": "json", ".yaml": "yaml", ".yml": "yaml", ".toml": "toml", ".ini": "ini",
              ".cfg": "ini", ".md": "markdown", ".js": "javascript", ".ts": "typescript", ".sh": "bash",
              ".html": "html", ".css": "css", ".txt": "text", ".csv": "csv"}
BLOCK_OUTPUT_CHARS = 2000  # a failed check's output is cut to its tail (the end says what failed)


def fence_lang(name: str) -> str:
    return FENCE_LANG.get("." + name.rpartition(".")[2].lower(), "") if "." in name else ""


FENCE_CLOSE = "\n```"


def fence_open(name: str) -> str:
    """How a whole-file reply starts; the local engine is given it, so the reply cannot take another shape."""
    return f"```{fence_lang(name)}\n"


def file_block(name: str, text: str) -> str:
    """A file shown whole, as raw text (not Read's numbered lines), so that a rewrite can copy it."""
    body = text if text.endswith("\n") or not text else text + "\n"
    return f"{name}\n```{fence_lang(name)}\n{body}```"


def whole_file_request(name: str, *, new: bool = False, failing: str = "") -> str:
    """failing: the check that was run first and failed (its output is above); the reply must fix what it shows."""
    if failing:
        return (f"`{failing}` fails as shown above. Write the complete new content of {name} with the bug fixed, "
                f"as one ```{fence_lang(name)} code block. Reply with the code block only.")
    verb = "Write the content of the new file" if new else "Write the complete new content of"
    return (f"{verb} {name}, with the change the request asks for, as one ```{fence_lang(name)} code block. "
            "Reply with the code block only.")


FRESH_SYSTEM = "Act as an expert software developer. Follow the user's request exactly."


def fresh_look(files: list[tuple[str, str]], request: str, name: str) -> list[dict]:
    """A whole conversation in the bare model's shape (Aider's whole-file prompt): the files, the request, the
    file to write; no tools, no harness notes, no earlier attempt. Its candidates differ from the session's."""
    shown = "\n\n".join(file_block(n, text) for n, text in files)
    user = whole_file_ask(shown, request, name)
    return [{"role": "system", "content": FRESH_SYSTEM}, {"role": "user", "content": user}]


def whole_file_ask(shown: str, request: str, name: str) -> str:
    """The bare model's one user message (evals/bare.py writes its own file blocks): files, request, the file."""
    return (f"Here are the files of my project.\n\n{shown}\n\n{request}\n\nChange only {name}. Reply with the "
            f"complete new content of {name} in one fenced code block: every line of the file, from the first to "
            "the last, with nothing left out.")


def append_request(name: str) -> str:
    """New top-level code for an existing file: only the addition is written; the harness appends it."""
    return (f"Write only the new code to add at the end of {name} (with any import it needs), as one "
            f"```{fence_lang(name)} code block. Do not repeat the existing code. Reply with the code block only.")


def member_request(name: str, cls: str) -> str:
    """A new method for an existing class: only the method is written; the harness puts it at the class's end."""
    return (f"Write only the new method of class {cls} (with any import it needs), as one ```{fence_lang(name)} code "
            f"block; the harness adds it to the end of {cls} in {name}. Do not repeat the existing code. Reply with "
            "the code block only.")


def output_lacks(expected: str) -> str:
    """A script ran cleanly but did not print what the request says it should."""
    return f"The output does not have the line `{expected}` that the request expects."


def error_instead() -> str:
    """A reported crash now ends cleanly with an error line: the input should work, not be refused."""
    return ("It no longer crashes, but it prints an error instead of doing what the request asks; make that input "
            "work.")


def output_unchanged() -> str:
    """A script the request says prints the wrong thing printed exactly what it printed before the change."""
    return "The output is the same as before the change, and the request says that output is wrong."


def still_far(label: str, line: str) -> str:
    """A script's wrong number changed, but is still far from the rough size the request gives for it, or its line
    is gone."""
    if not line:
        return f"The output no longer has the `{label}` line; it must stay, with the amount the request gives."
    return f"The output now has `{line}`, still far from the amount the request says it should be about."


def output_changed(expected: str) -> str:
    """A script printed the wanted line, but other lines of its output are no longer what they were."""
    return (f"The output has `{expected}`, but its other lines changed; the request asks only for that line, so the "
            "other lines must print as before.")


def which_file(names: list[str]) -> str:
    """The one-line decision before a fix whose file is not named: which of the files the failure reaches."""
    return (f"Which one of these files has the bug that makes it fail: {', '.join(names)}? "
            "Reply with the file name only.")


def harness_found(findings: list[str]) -> str:
    """What the harness found by reading the code (no command run), ahead of an edit request."""
    return "The harness found: " + "; ".join(findings) + "."


def rewrite_unchanged(name: str, again: str) -> str:
    """After a greedy whole-file rewrite that copied the file unchanged: the rewrite asked for again (sampled)."""
    return f"Your rewrite left {name} as it was; it must make the change the request asks for.\n{again}"


def edit_after_unchanged(name: str) -> str:
    """After a whole-file rewrite that copied the file unchanged: the one change as an Edit call instead."""
    return (f"Your rewrite left {name} as it was. Make the fix with one Edit call on {name}: old_string copied "
            "exactly from the file above (whole lines), new_string those lines fixed.")


def search_results(rows: list[str]) -> str:
    """Where the request's identifiers and quoted strings occur, found by the harness (path:line: text)."""
    return block("search-results", "\n".join(rows))


def answer_from_files(explain: bool = False) -> str:
    """explain: the request asks what code does (a sentence or two gave "contains small arithmetic helpers")."""
    if explain:
        return ("The files above are all you need. Answer the request in plain text now, in a short paragraph: "
                "name each function or part and say what it does.")
    return "The files above are all you need. Answer the request in plain text now, in a sentence or two."


def list_before_counting(which: str) -> str:
    """A "how many" question asked as "which": the things one per line (the harness counts them)."""
    return (f"{which}\nAnswer with a list of them, as the files above have them, one per line, each line starting "
            "with `- `, and nothing else. Leave out what is commented out or only mentioned in text.")


def answer_from(source: str) -> str:
    """The last step of a one-tool route (a skill, a subagent, a listing): a text answer from what it returned."""
    return f"Answer the request in plain text now, from the {source} above, in a sentence or two."


def plan_request() -> str:
    return ("Plan mode is on: nothing may be changed yet. Write the plan for the request in plain text: numbered "
            "steps, each naming the file to change and the change to make in it.")


def files_found(count: int, pattern: str) -> str:
    """Said with a Glob result: small models miscount a list of paths."""
    return f"Glob found {count} file{'s' if count != 1 else ''} matching {pattern}."


def edit_region_request(name: str, region: str) -> str:
    """A long file: the lines around what the request mentions, and one Edit call to make."""
    return (f"{name} is long; these are its lines around what the request mentions:\n{region}\n"
            f"Call Edit on {name}: old_string copied exactly from these lines (without the line numbers), "
            "new_string the changed text.")


def region_request(name: str, start: int, end: int, text: str, long: bool = True) -> str:
    """A long file (or the definition a bug was traced to): one window of it shown raw, to be rewritten whole (the
    harness splices it back)."""
    body = text if text.endswith("\n") else text + "\n"
    lead = f"{name} is long; these are its lines {start}-{end}" if long else f"These are lines {start}-{end} of {name}"
    return (f"{lead}:\n```{fence_lang(name)}\n{body}```\n"
            f"Write the new content of lines {start}-{end} of {name}, with the change the request asks for, as one "
            f"```{fence_lang(name)} code block. Reply with the code block only.")


def focused_request(name: str, text: str, test_file: str, test: str, error: str, definition: str) -> str:
    """After a rewrite that failed one test: that test and its error, and only the definition it reaches to write
    again (the harness puts it back in place of the old one)."""
    lang = fence_lang(name)
    kind = "method" if "." in definition else "function"
    return (f"{name} now reads:\n```{lang}\n{text.rstrip()}\n```\nThis test in {test_file} fails:\n```{lang}\n"
            f"{test.rstrip()}\n```\n{error}\n\nWrite the {kind} {definition} again so that this test passes, as one "
            f"```{lang} code block with only that {kind}. Reply with the code block only.")


def check_failed(name: str, what: str, output: str, diff: str = "", again: str = "", short: str = "") -> str:
    """The note that replaces a failed attempt when the harness tries again from a clean prefix: what was tried
    (its diff, cut), how it failed (the output's tail) and, when given, that failure in one sentence."""
    tail = output[-BLOCK_OUTPUT_CHARS:]
    cut = "[...]\n" if len(output) > BLOCK_OUTPUT_CHARS else ""
    tried = f"This change was tried:\n```diff\n{diff[:BLOCK_OUTPUT_CHARS].rstrip()}\n```\n" if diff else ""
    short = f"{short}\n" if short else ""
    return f"{tried}It was undone because {what} failed:\n{cut}{tail}\n{short}{again or whole_file_request(name)}"


_FENCED = re.compile(r"```[^\n`]*\n(.*?)(?:\n```|\Z)", re.DOTALL)


def fenced_block(reply: str) -> str | None:
    """The first fenced code block's text (a trailing newline kept); None when the reply has none."""
    m = _FENCED.search(reply)
    if m is None:
        return None
    return m.group(1).rstrip("\n") + "\n"


# ---- parsing what was written above

_LEAD_ONE = re.compile(r"\A<(%s)>\n.*?\n</\1>\n\n" % "|".join(LEAD_TAGS), re.DOTALL)
_LEAD_FIRST = re.compile(r"\A(?:<(memory|skills|agents|env|context)>\n.*?\n</\1>\n\n)+", re.DOTALL)
_ATTACHED = re.compile(r"\n\n<attached-file path=.*\Z", re.DOTALL)
_INSTRUCTION = re.compile(r"<instruction>\n(.*?)\n</instruction>", re.DOTALL)


def user_text(content: str) -> str:
    """What the user typed, from a user message (lead blocks and attachments removed)."""
    while True:
        stripped = _LEAD_ONE.sub("", content, count=1)
        if stripped == content:
            break
        content = stripped
    return _ATTACHED.sub("", content)


_SUBAGENT = re.compile(r'\A<subagent type="[^"]*">\n.*?\n</subagent>\n\n', re.DOTALL)


def subagent_job(prompt: str) -> str:
    """The job in a child's first prompt (subagent_prompt without its definition); other prompts unchanged."""
    m = _SUBAGENT.match(prompt)
    return prompt[m.end():] if m else prompt


def leading_blocks(first_user_content: str) -> str:
    """The memory/skills/agents/env/context blocks that open the first user message, verbatim."""
    m = _LEAD_FIRST.match(first_user_content or "")
    return m.group(0).rstrip("\n") if m else ""


def is_internal(content: str) -> bool:
    """A user message the harness wrote (a reminder, Stop hook feedback), not the user."""
    return content.startswith(INTERNAL_PREFIXES)


def state_instructions(content: str) -> list[str] | None:
    """The verbatim instructions kept in a compacted-state block; None when `content` has none."""
    if STATE_OPEN not in content:
        return None
    return _INSTRUCTION.findall(content.split(STATE_OPEN, 1)[1].split(STATE_CLOSE, 1)[0])
