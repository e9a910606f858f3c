def verify(run):
    assert run.exists("hello.txt"), "hello.txt was not created"
    assert run.text("hello.txt").strip() == "hello world", f"hello.txt holds {run.text('hello.txt')[:100]!r}"
