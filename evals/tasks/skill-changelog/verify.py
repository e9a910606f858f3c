def verify(run):
    loaded = [res for args, res in run.succeeded("Skill") if args.get("skill") == "changelog"]
    assert loaded, f"the changelog skill was not loaded with the Skill tool (calls: {[c['name'] for c in run.tool_calls]})"
    lines = [ln.strip() for ln in run.text("CHANGELOG.md").strip().splitlines()]
    assert lines == ["# Changelog", "- r17: first public release"], f"CHANGELOG.md holds {lines}"
