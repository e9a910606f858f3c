def verify(run):
    assert run.text("calc.py") == run.original("calc.py"), "calc.py was changed in plan mode"
    assert any(c.get("file_path", "").endswith("calc.py") for c in run.calls("Read")), "calc.py was never read"
    assert run.ok and run.answer.strip(), "the run did not end with an answer (a plan)"
