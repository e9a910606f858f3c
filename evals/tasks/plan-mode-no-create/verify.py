def verify(run):
    assert not run.exists("TODO.md"), "TODO.md was created in plan mode"
    created = sorted(p.name for p in run.dir.iterdir() if not p.name.startswith(".") and p.name != "README.md")
    assert not created, f"files were created in plan mode: {created}"
    assert run.ok and run.answer.strip(), "the run did not end with an answer (a plan)"
