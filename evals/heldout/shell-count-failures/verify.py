import re


def verify(run):
    ran = [c for c in run.tool_calls if c["name"] == "Bash" and "test" in c["arguments"].get("command", "")]
    assert any("failures=3" in run.result_of(c["id"]) for c in ran), "the tests were never run with Bash"
    words = re.findall(r"\b(?:\d+|three)\b", run.answer.lower())
    assert "3" in words or "three" in words, f"the answer does not say 3: {run.answer[:200]!r}"
    for name in ("units.py", "test_units.py"):
        assert run.text(name) == run.original(name), f"{name} was changed; the task was only to report"
