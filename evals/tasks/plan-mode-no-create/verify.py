def verify(run):
    assert not run.exists("TODO.md"), "TODO.md was created in plan mode"
    created = sorted(p.name for p in run.dir.iterdir() if not p.name.startswith(".") and p.name != "README.md")
    assert not created, f"files were created in plan mode: {created}"
    assert run.ok and run.answer.strip(), "the run did not end with an answer (a plan)"
    # A plan comes from the project: some tool result showed README.md (its "Missing: ..." line). Without this,
    # doing nothing at all passed (0.5B, 2c3aae2: a failed Task call, then the prompt echoed as the "plan").
    assert any("Missing: tests" in r["content"] for r in run.tool_results if not r["is_error"]), \
        "the project was never looked at (no tool result shows README.md)"
