def verify(run):
    assert run.text("test_leaderboard.py") == run.original("test_leaderboard.py"), "test_leaderboard.py was changed"
    r = run.python("-m", "unittest", "-q", "test_leaderboard")
    assert r.returncode == 0, f"the tests in test_leaderboard.py still fail: {(r.stdout + r.stderr)[-800:]}"
    # The bug is in ranking.rank (equal points came out in reverse name order); best() uses it too.
    r = run.python("-c", "from ranking import rank, best; "
                         "print(rank({'b': 2, 'a': 2, 'c': 5, 'd': 1}), best({'y': 4, 'x': 4}), best({}))")
    assert r.stdout.strip() == "[('c', 5), ('a', 2), ('b', 2), ('d', 1)] ('x', 4) None", \
        f"ranking.rank / best still order equal points wrongly: {(r.stdout + r.stderr)[-400:]}"
