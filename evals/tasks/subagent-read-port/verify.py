def verify(run):
    reports = [res for _, res in run.succeeded("Task")]
    assert reports, f"no Task call succeeded: the work was not delegated (calls: {[c['name'] for c in run.tool_calls]})"
    assert any("55432" in r for r in reports), "no subagent report gives the port"
    assert "55432" in run.answer, f"the answer does not give 55432: {run.answer[:200]!r}"
