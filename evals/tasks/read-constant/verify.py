import re


def verify(run):
    assert re.search(r"\b17\b", run.answer), f"the answer does not say 17: {run.answer[:200]!r}"
