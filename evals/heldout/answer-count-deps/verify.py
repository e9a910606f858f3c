import re


def verify(run):
    numbers = re.findall(r"\b(?:seven|eleven|\d+)\b", run.answer.lower())
    assert "7" in numbers or "seven" in numbers, f"the answer does not give 7: {run.answer[:200]!r}"
    assert not {"11", "eleven"} & set(numbers), f"the answer counts devDependencies too: {run.answer[:200]!r}"
