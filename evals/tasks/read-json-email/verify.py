def verify(run):
    assert "mira.kovacs@example.net" in run.answer.lower(), f"wrong or missing email: {run.answer[:200]!r}"
