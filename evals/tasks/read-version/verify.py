def verify(run):
    assert "4.12.7" in run.answer, f"the answer does not give 4.12.7: {run.answer[:200]!r}"
