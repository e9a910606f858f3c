def verify(run):
    ran = [c for c in run.tool_calls if c["name"] == "Bash" and "checksum.py" in c["arguments"].get("command", "")]
    assert ran, "checksum.py was never run with Bash"
    assert any("d2c90c79" in run.result_of(c["id"]) for c in ran), "no run of checksum.py printed d2c90c79"
    assert "d2c90c79" in run.answer, f"the answer does not give d2c90c79: {run.answer[:200]!r}"
