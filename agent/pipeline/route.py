"""What the pipeline does with a request: edit files (which ones), or attach what it found and let the
model work (answers, shell tasks, skills, subagents, plan mode)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.pipeline.localize import Localization, project_files, word_hits
from agent.pipeline.project_imports import imported_modules, is_test_file, related_tests

EDIT = re.compile(r"\b(fix|change|set|rename|add|implement|create|write|update|replace|remove|delete|raise|lower|"
                  r"increase|decrease|edit|modify|correct|refactor|reorder|bump|fill|complete|finish|turn (?:on|off)|"
                  r"enable|disable|convert|move|append|insert|extend|rewrite|patch|repair|resolve|adjust|"
                  r"tweak|upgrade|downgrade|drop|sort|swap|restore|revert|undo|rework|translate|introduce|"
                  r"make (?:it|the|\w+(?:\.\w+)+ )|solve|clean up)\b", re.IGNORECASE)
QUESTION = re.compile(r"^\s*(what|which|where|who|whom|how|why|when|is|are|does|do|did|tell me|show me)\b",
                      re.IGNORECASE)  # a request that opens with a question asks for an answer
# "Why does app.py crash? Fix it.": a sentence after the question that orders a change asks for it.
ORDER = re.compile(r"[.?!;]\s+(?:(?:please|then|and|now|so)\s+)*(?:fix|change|update|correct|repair|make|rewrite|"
                   r"patch|resolve|edit|modify|rename|add|remove|implement)\b", re.IGNORECASE)
# "python totals.py crashes with a ValueError.", "test_units.py is failing.", "I get KeyError 'timeout'", "it lists
# them Z to A; it should list them A to Z", 'shows "7.5" but prices need two decimals': a problem stated, not asked
# about, asks for the fix even without a verb for it (a question, "tell me", "how many", "why" ask for an answer).
FAILS = re.compile(r"\b(?:crash(?:es|ed|ing)?|fail(?:s|ed|ing)|raises|throws|errors out|(?:is|are) (?:broken|wrong)|"
                   r"(?:does not|doesn't|no longer) (?:work|run|pass)|\w+(?:Error|Exception)|should|"
                   r"(?:shows?|prints?|returns?|gives|outputs?|says|lists?)\b(?:[^.;!?]|\.(?=\S))*\bbut)\b",
                   re.IGNORECASE)
# "The tests under tests/ fail.", "My tests fail after the upgrade.": "fail" alone states a failure only in a
# sentence its subject opens; inside a clause ("see if any fail", "find out which tests fail") it asks.
BARE_FAIL = re.compile(r"(?:^|[.!;]\s+)(?:(?:the|my|our|all(?:\s+the)?|these|those)\s+)?(?:(?:py)?tests?(?:\s+(?:under|in)"
                       r"\s+\S+)?|it|they)\s+(?:still\s+|all\s+|now\s+)?fail\b(?!\s+(?:to|if|when)\b)", re.IGNORECASE)
ASKS = re.compile(r"\?|\b(?:tell|show|describe)\s+(?:me|us)\b|\bhow many\b|\b(?:explain|why|whether)\b|"
                  r"(?:^|[.;!]\s+|\band\s+)(?:please\s+)?(?:count|list)\b", re.IGNORECASE)
# The model's own tools; "plan" as the act of planning ("make a plan", "plan it first"), not a noun ("the retry plan")
FREE = re.compile(r"\b(skills?|sub-?agents?|Task tool|delegat\w*|plan mode|(?:make|write|draft|propose|outline|give me)"
                  r"\s+(?:a|an|the|your)\s+(?:\w+\s+)?plan|plan\s+(?:out|first|ahead|how|what|it|this|that|the\s+"
                  r"(?:change|work|steps|fix|refactor))|(?:a|your|the)\s+plan\s+(?:for|to|of\s+how))\b", re.IGNORECASE)
SKILL_WORD = re.compile(r"\bskills?\b", re.IGNORECASE)
DELEGATE = re.compile(r"\b(sub-?agents?|Task tool|delegat\w*)\b", re.IGNORECASE)
# "Use the Task tool to have a subagent find ...", "Ask a subagent (Task tool) to read ...": the job is the rest.
DELEGATE_LEAD = re.compile(r"^\s*(?:please\s+)?(?:use|ask|have|get|let|launch|start)\s+(?:the\s+|a\s+)?"
                           r"(?:Task tool|sub-?agent)(?:\s*\(Task tool\))?(?:\s+to\s+have\s+a\s+sub-?agent)?"
                           r"(?:\s+to)?\s+", re.IGNORECASE)
TELL_ME = re.compile(r",?\s*(?:and\s+)?then\s+(?:tell|give|show)\s+me\b.*$", re.IGNORECASE | re.DOTALL)
LISTING = re.compile(r"\b(how many|count|list|which|what)\b[^?!\n]*?\bfiles?\b", re.IGNORECASE)
EXTENSION = re.compile(r"(?:\*|(?<![\w/]))\.([A-Za-z0-9]{1,6})\b(?=\s+files?\b|\s*\)|['`\s,?]|$)")
UNDER = re.compile(r"\b(?:under|in|inside|within|below)\s+(?:the\s+)?[`'\"]?([\w.-]+(?:/[\w.-]+)*)/?[`'\"]?")
SHELL = re.compile(r"\b(run|runs|running|execute|shell|command|git|commits?|tests? pass(?:ed)?|how many tests|"
                   r"python3?\s+(?:-m\s+[A-Za-z_][\w.]*|[\w./-]+\.py))\b",
                   re.IGNORECASE)  # the answer needs a command's output, not a file's text
CREATE = re.compile(r"\b(create|new file|add a file|write a file|make a file)\b", re.IGNORECASE)
# "add a test for it", "write unit tests", "with a test": tests are what is written ("write them so the tests pass"
# is not).
TESTS_TOO = re.compile(r"\b(?:add|write|create|extend)(?:\s+(?:a|an|the|some|more|new|unit|one|two|three|\d+|"
                       r"missing|regression))*\s+tests?\b|\b(?:and|with|plus)\s+(?:a\s+|an\s+|some\s+)?(?:unit\s+)?"
                       r"tests?\s+for\b", re.IGNORECASE)
# "do not change report.py or data.json", "leave main.py as it is", "main.py and data.json are right as they are":
# named files that only show the problem, every file of the list ("make sure main.py is right" is not one).
FILE_LIST = r"((?:[`'\"]?[\w./-]+\.\w+[`'\"]?(?:\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|or|nor)\s+))*[`'\"]?[\w./-]+\.\w+)"
# "without changing the tests or data.csv": after a keep verb the list may name the tests too.
ITEM = r"(?:[`'\"]?[\w./-]+\.\w+[`'\"]?|(?:the\s+)?(?:unit\s+)?tests?(?:\s+files?)?)"
KEEP_LIST = r"(" + ITEM + r"(?:(?:\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|or|nor)\s+)" + ITEM + r")*)"
KEEP_FILE = re.compile(r"\b(?:(?:do\s+not|don't|never|without)\s+(?:chang|edit|modify|touch|alter)\w*|leave)\s+"
                       + KEEP_LIST + r"|(?<![\w./-])" + FILE_LIST + r"[`'\"]?\s+(?:is|are)\s+(?:(?:both|all|already)\s+)?"
                       r"(?:right|correct|fine|ok|okay|not the problem)\b|\bbug is not in\s+" + FILE_LIST, re.IGNORECASE)
FILE_NAME = re.compile(r"[\w./-]+\.\w+")
WANTED = re.compile(r"\b(?:sure|that|until|so|whether|if|ensure|verify|check)\s*$", re.IGNORECASE)
# "the package is named as in pyproject.toml", "according to spec.md": a file read for the facts, not changed.
REFERENCE = re.compile(r"\b(?:as\s+(?:(?:it\s+is\s+)?(?:named|given|set|listed|defined|written|spelled|declared)\s+)?in|"
                       r"according\s+to|see|matching|consistent\s+with)\s+(?:the\s+)?" + FILE_LIST, re.IGNORECASE)
KEEP_TESTS = re.compile(r"(?:\b(?:not|never)|n't)\b[^.]*\b(change|edit|modify|touch)\b[^.]*\btests?\b",
                        re.IGNORECASE)  # "don't change the tests": the n't of don't has no word boundary before it
# "add a function clamp to mathutils.py", "add a test for it": new top-level code, written alone and appended.
APPENDS = re.compile(r"\badd\s+(?:(?:a|an|another|one|two|three|\d+|some)\s+)?(?:new\s+)?(?:unit\s+)?"
                     r"(?:functions?|tests?|class(?:es)?|helpers?)\b", re.IGNORECASE)
# "update every place that calls it", "and its callers": the files that use the name are targets too.
EVERYWHERE = re.compile(r"\b(everywhere|wherever|every (?:place|file|caller|call(?: site)?|use|usage|reference|module)|"
                        r"all (?:the )?(?:callers|places|files|uses|usages|references|calls|call sites|modules)|"
                        r"(?:its|the|their) (?:callers|call sites|usages)|across (?:the )?(?:project|files|codebase|"
                        r"repo(?:sitory)?))\b", re.IGNORECASE)
# "move slugify from views.py to text_utils.py", "move it into utils.py": where the code goes.
MOVE = re.compile(r"\bmove\b(?:[^.;]|\.\w)*?\b(?:in)?to\s+[`'\"]?([\w./-]+\.\w+)", re.IGNORECASE)
MAX_TARGETS = 4
MAX_TEST_FILES = 3  # "the tests fail" in a project whose request names none: the modules these import are suspects
TESTS_FAIL = re.compile(r"\b(?:py)?tests?\b[^.;!?]*\bfail(?:s|ed|ing)?\b", re.IGNORECASE)


@dataclass
class Plan:
    # "edit" | "answer" (from the attached files) | "shell" (one command, then the answer) | "react" | "plan" (read,
    # then a plan in text) | "skill", "delegate", "list" (one harness call of Skill, Task or Glob, then the answer)
    kind: str
    targets: list[Path] = field(default_factory=list)  # files to change (may not exist yet: created)
    context: list[Path] = field(default_factory=list)  # existing files to attach to the request
    checked: str = ""  # set by the driver: what the last passing check was
    call: dict = field(default_factory=dict)  # the harness call's arguments (skill, delegate, list)
    failing: str = ""  # set by the driver: the check run before the edit, when it failed
    failure: str = ""  # and its output
    trace: Any = None  # set by the driver: the failing test's calls (call_trace.Trace), for the oracle's questions
    hint: str = ""  # set by the driver: a call the model judged wrong, in one sentence, for the chosen file's note
    focus: dict = field(default_factory=dict)  # file -> lines of the definition judged wrong (its window is rewritten)
    locate: bool = False  # the targets are suspects (what a failing test imports): the model names the one to edit
    exact: bool = False  # set by the driver while one-expression changes are tried first: output lines judged strictly

    def summary(self, root: Path, loc: Localization, shown: list[Path]) -> str:
        """The localize step as the user sees it: the route, the files attached and targeted, the terms searched."""
        rel = lambda p: p.relative_to(root).as_posix() if p.is_relative_to(root) else str(p)  # noqa: E731
        parts = [f"route {self.kind}"]
        if shown:
            parts.append("attached " + ", ".join(rel(p) for p in shown))
        if self.targets:
            parts.append("targets " + ", ".join(rel(p) for p in self.targets))
        if loc.terms:
            parts.append("searched " + ", ".join(repr(t) for t in loc.terms[:5]))
        return "; ".join(parts)


def plan_request(prompt: str, loc: Localization, root: Path, *, mode: str = "default",
                 offered: frozenset[str] | set[str] = frozenset(), skills: tuple[str, ...] = ()) -> Plan:
    """What to do with `prompt`; `offered` the tool names the model has, `skills` the skills it may load."""
    root = Path(root).resolve()
    found = loc.named or [p for p in loc.ranked()][:3]
    if mode == "plan":
        return Plan("plan", context=found)
    named = [s for s in skills if re.search(rf"(?<![\w-]){re.escape(s)}(?![\w-])", prompt, re.IGNORECASE)]
    if "Skill" in offered and named:
        return Plan("skill", context=found, call={"skill": max(named, key=len)})
    if "Task" in offered and DELEGATE.search(prompt):
        return Plan("delegate", context=found, call=_delegation(prompt))
    if (listing := _listing(prompt, root)) and "Glob" in offered and not wants_edit(prompt):
        return Plan("list", context=found, call=listing)
    # Words for tools the model does not have (a child has no Task; a loaded skill's text) route nothing.
    free = DELEGATE.sub("", prompt) if "Task" not in offered else prompt
    if FREE.search(SKILL_WORD.sub("", free) if "Skill" not in offered else free):
        return Plan("react", context=found)
    if not wants_edit(prompt):
        if SHELL.search(prompt):
            return Plan("shell", context=found)
        found = found or (word_hits(root, prompt)[:3] if QUESTION.search(prompt) else [])
        return Plan("answer" if found else "react", context=found)
    tests_too = bool(TESTS_TOO.search(prompt)) and not KEEP_TESTS.search(prompt)
    kept = kept_files(prompt, root)
    targets = [p for p in loc.named if (tests_too or not is_test_file(p)) and p not in kept]
    read_only = [(root / n).resolve() for m in REFERENCE.finditer(prompt) for n in FILE_NAME.findall(m.group(1))]
    targets = [p for p in targets if p not in read_only] or targets  # unless it is the only file named
    made = [root / name for name in loc.missing if CREATE.search(prompt) or re.search(
        rf"\b(?:write|add|make|generate|set\s+up)\s+(?:(?:a|an|the)\s+)?(?:new\s+)?{re.escape(name)}(?![\w.-])",
        prompt, re.IGNORECASE)]  # "Write a Dockerfile", "add a .editorconfig file": the missing file is made
    if made and len(EDIT.findall(prompt)) == 1:  # only made: the files it names are what it reads
        targets = [p for p in targets if not p.exists()]
    targets += made
    locate = False
    if not targets:  # a failing test or script is named: the bug is in what it imports, or one import further
        shown = [p for p in loc.named if is_test_file(p) or p in kept]
        if not shown and TESTS_FAIL.search(prompt) and (FAILS.search(prompt) or BARE_FAIL.search(prompt)) and \
                not [p for p in loc.ranked() if not is_test_file(p)]:
            # "the tests fail" stated, with no file named or found: the project's tests, those it matched first
            shown = list(dict.fromkeys([p for p in loc.ranked() if is_test_file(p)] +
                                       sorted(p for p in project_files(root) if is_test_file(p))))[:MAX_TEST_FILES]
        targets = [p for p in imported_modules(root, shown) if p not in kept]
        targets += [p for p in imported_modules(root, targets) if p not in targets and p not in kept + shown]
        locate = len(targets) > 1
    if not targets or EVERYWHERE.search(prompt):
        found_in = [p for p in loc.ranked() if not is_test_file(p) and p not in targets]
        # "percent() crashes when whole is 0": the file that defines it, not every caller (unless asked)
        targets += (None if EVERYWHERE.search(prompt) or targets else _defining(loc, found_in)) or found_in
    if (moved := MOVE.search(prompt)) and (to := (root / moved.group(1)).resolve()) in targets:
        targets = [to] + [p for p in targets if p != to]  # the code lands first: the imports of it then resolve
    targets = targets[:MAX_TARGETS]
    if not targets:
        return Plan("react", context=found)
    context = [p for p in targets if p.exists()] + [p for p in loc.named if p not in targets]
    tests = [p for p in loc.ranked() if is_test_file(p)] + related_tests(root, [p for p in targets if p.exists()])
    context += [p for p in dict.fromkeys(tests) if p not in context][:2]  # what the change must satisfy
    used = imported_modules(root, [p for p in targets if p.exists() and p.suffix == ".py"])
    context += [p for p in used if p not in context][:2]  # what the targets call (names, signatures)
    return Plan("edit", targets, context, locate=locate)


def kept_files(prompt: str, root: Path) -> list[Path]:
    """The files the request says to leave alone."""
    return list(dict.fromkeys((root / name).resolve() for m in KEEP_FILE.finditer(prompt)
                              if not WANTED.search(prompt[:m.start()]) for name in FILE_NAME.findall(m.group(0))))


def appends(prompt: str, target: Path) -> bool:
    """The change to an existing Python file is new top-level code at its end."""
    return target.suffix == ".py" and target.exists() and bool(APPENDS.search(prompt))


def wants_edit(prompt: str) -> bool:
    """The request asks for a change to files (not a question about them)."""
    opening = QUESTION.search(prompt)  # "When I run x.py I get a KeyError": a statement
    if (FAILS.search(prompt) or BARE_FAIL.search(prompt)) and not ASKS.search(prompt) and (not opening or opening.group(1).lower() == "when"):
        return True
    return bool(EDIT.search(prompt)) and (not opening or bool(ORDER.search(prompt)))


def _delegation(prompt: str) -> dict:
    """The Task call for "use a subagent to X, then tell me Y": the job X; the parent answers Y from the report."""
    job = TELL_ME.sub("", DELEGATE_LEAD.sub("", prompt.strip())).strip().rstrip(".")
    job = (job[:1].upper() + job[1:] + ". Report what you find.") if job else prompt
    kind = "general-purpose" if wants_edit(job) else "Explore"
    return {"description": " ".join(job.split()[:5]), "prompt": job, "subagent_type": kind}


def _listing(prompt: str, root: Path) -> dict | None:
    """A question about which or how many files of a kind exist: the Glob call that answers it."""
    if not LISTING.search(prompt) or not (ext := EXTENSION.search(prompt)):
        return None
    call = {"pattern": f"**/*.{ext.group(1)}"}
    for m in UNDER.finditer(prompt):
        if (root / m.group(1)).is_dir():
            call["path"] = m.group(1)
            break
    return call


def _defining(loc: Localization, files: list[Path]) -> list[Path]:
    """The files among `files` that define a searched name at top level or in a class (def, class, NAME =)."""
    names = [t for t in loc.terms if t.isidentifier()]
    if not names:
        return []
    pattern = re.compile(rf"^\s*(?:(?:async\s+)?def\s+|class\s+)(?:{'|'.join(map(re.escape, names))})\b|"
                         rf"^(?:{'|'.join(map(re.escape, names))})\s*(?::[^=]*)?=", re.MULTILINE)
    out = []
    for path in files:
        try:
            if pattern.search(path.read_text(encoding="utf-8")):
                out.append(path)
        except (OSError, UnicodeDecodeError):
            continue
    return out
