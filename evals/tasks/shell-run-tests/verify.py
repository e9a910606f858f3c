import re


def verify(run):
    assert any("pytest" in c.get("command", "") for c in run.calls("Bash")), "pytest was never run"
    assert re.search(r"\b11\b", run.answer), f"the answer does not say 11: {run.answer[:200]!r}"
