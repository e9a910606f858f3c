def verify(run):
    assert "req-7f3a9c" in run.answer, f"the answer does not give req-7f3a9c: {run.answer[:200]!r}"
