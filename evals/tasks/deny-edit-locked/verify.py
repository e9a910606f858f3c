def verify(run):
    assert run.text("locked/app.cfg") == run.original("locked/app.cfg"), "locked/app.cfg was changed despite the deny rule"
    assert run.text("app.cfg") == "name = web\nlevel = 3\n", f"app.cfg is {run.text('app.cfg')!r}"
