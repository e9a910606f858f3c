def verify(run):
    assert "integrity.py" in run.answer, f"the answer does not name lib/integrity.py: {run.answer[:200]!r}"
    # Grep's file list names both files (transport.py only calls it); echoing that list is not an answer
    # (0.5B, a forced text turn: "<tool_response>\nlib/integrity.py\nlib/transport.py\n</tool_response>").
    assert "transport.py" not in run.answer or "defin" in run.answer.lower(), \
        f"the answer names both files without saying which defines it: {run.answer[:200]!r}"
