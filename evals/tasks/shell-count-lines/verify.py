import re


def verify(run):
    assert any("data.csv" in c.get("command", "") for c in run.calls("Bash")), "no Bash command touched data.csv"
    assert re.search(r"\b1,?337\b", run.answer), f"the answer does not say 1337: {run.answer[:200]!r}"
