def verify(run):
    assert run.text("show.py") == run.original("show.py"), "show.py was changed; the bug is not in it"
    r = run.python("show.py")
    assert r.returncode == 0 and r.stdout == "1. 94\n2. 90\n3. 88\naverage 81.6\n", \
        f"python show.py prints: {(r.stdout + r.stderr)[-400:]}"
    r = run.python("-c", "from ranking import top_scores as t; print(t([3, 9, 1], 2), t([], 3), t([5], 3))")
    assert r.stdout.strip() == "[9, 3] [] [5]", f"ranking.top_scores gives: {(r.stdout + r.stderr)[-400:]}"
