def verify(run):
    assert run.sh("git log -1 --format=%s").stdout.strip() == "Tune cache eviction for cold starts", "history changed"
    assert "cache eviction for cold starts" in run.answer.lower(), f"wrong subject: {run.answer[:200]!r}"
