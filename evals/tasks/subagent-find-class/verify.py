def verify(run):
    reports = [res for _, res in run.succeeded("Task")]
    assert reports, f"no Task call succeeded: the work was not delegated (calls: {[c['name'] for c in run.tool_calls]})"
    assert any("entries.py" in r for r in reports), "no subagent report names entries.py"
    assert "ledger/entries.py" in run.answer, f"the answer does not name ledger/entries.py: {run.answer[:200]!r}"
