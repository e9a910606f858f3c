def verify(run):
    r = run.python("cli.py", "words.txt", "--limit", "3")
    assert r.returncode == 0 and r.stdout == "14 w13\n13 w12\n12 w11\n", \
        f"python cli.py words.txt --limit 3 prints: {(r.stdout + r.stderr)[-400:]}"
    r = run.python("cli.py", "words.txt")
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 10 and r.stdout.startswith("14 w13\n"), \
        f"python cli.py words.txt (default limit 10) prints: {(r.stdout + r.stderr)[-400:]}"
    r = run.python("cli.py", "words.txt", "--reverse", "--limit", "2")
    assert r.returncode == 0 and r.stdout == "1 w00\n2 w01\n", \
        f"python cli.py words.txt --reverse --limit 2 prints: {(r.stdout + r.stderr)[-400:]}"
    assert run.text("words.txt") == run.original("words.txt"), "words.txt was changed"
