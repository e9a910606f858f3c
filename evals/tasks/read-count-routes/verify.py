import re


def verify(run):
    words = re.findall(r"\b(?:\d+|six|seven)\b", run.answer.lower())
    assert words[:1] in (["6"], ["six"]) and not {"7", "seven"} & set(words), \
        f"the answer does not say 6: {run.answer[:200]!r}"
