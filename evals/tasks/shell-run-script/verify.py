def verify(run):
    ran = [c for c in run.tool_calls if c["name"] == "Bash" and "compute.py" in c["arguments"].get("command", "")]
    assert ran, "compute.py was never run with Bash"
    assert any("65799" in run.result_of(c["id"]) for c in ran), "no run of compute.py printed 65799"
    assert "65799" in run.answer, f"the answer does not give 65799: {run.answer[:200]!r}"
