import re


def verify(run):
    assert re.search(r"\b7\b|\bseven\b", run.answer.lower()), f"the answer does not say 7: {run.answer[:200]!r}"
