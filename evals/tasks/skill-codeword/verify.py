def verify(run):
    loaded = [res for args, res in run.succeeded("Skill") if args.get("skill") == "release-checklist"]
    assert loaded, f"the release-checklist skill was not loaded with the Skill tool (calls: {[c['name'] for c in run.tool_calls]})"
    assert "PLUM-7731" in run.answer, f"the answer does not give the code word: {run.answer[:200]!r}"
