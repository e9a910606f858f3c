def verify(run):
    assert "integrity.py" in run.answer, f"the answer does not name lib/integrity.py: {run.answer[:200]!r}"
