import json


def verify(run):
    data = run.json("package.json")
    assert data is not None, "package.json is not valid JSON any more"
    expected = json.loads(run.original("package.json"))
    expected["scripts"]["test"] = "pytest -q"
    assert data == expected, f"package.json is {data}"
