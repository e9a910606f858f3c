def verify(run):
    new, old = run.text("README.md"), run.original("README.md")
    assert "    pip install fieldnotes\n" in new and "fieldnotes-cli" not in new, \
        f"the install line is now: {[ln for ln in new.splitlines() if 'pip' in ln]}"
    assert new.replace("pip install fieldnotes\n", "pip install fieldnotes-cli\n") == old, \
        "README.md changed in other places too"
    assert run.text("pyproject.toml") == run.original("pyproject.toml"), "pyproject.toml was changed"
