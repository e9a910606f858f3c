def verify(run):
    assert len(run.results) == 2, "the follow-up prompt did not run"
    assert run.results[0].get("session_id") == run.results[1].get("session_id"), "the follow-up ran in a new session"
    assert "VELVET-ORCA-19" in run.answer, f"the follow-up answer does not recall it: {run.answer[:200]!r}"
