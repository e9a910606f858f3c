def verify(run):
    assert "enforce_quota" in run.answer, f"the answer does not name enforce_quota: {run.answer[:200]!r}"
