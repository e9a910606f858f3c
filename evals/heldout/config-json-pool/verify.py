import json


def verify(run):
    data = run.json("settings.json")
    assert data is not None, "settings.json is not valid JSON"
    expected = json.loads(run.original("settings.json"))
    expected["database"]["pool"]["max"] = 25
    assert data == expected, f"settings.json is {data}"
