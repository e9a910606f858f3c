"""A literal change the request spells out ("says 'Helo' instead of 'Hello'", "from 8080 to 9090") made by the
harness, then checked; ambiguous or unsafe ones left to the model. Real files, real subprocesses, scripted engine."""
import pytest

from agent.pipeline.replace import plan_replace

GREET = 'def greet(name):\n    return f"Helo, {name}!"\n\n\nif __name__ == "__main__":\n    print(greet("world"))\n'
INI = "[server]\nhost = localhost\nport = 8080\n# the old port was 8080 too\n[db]\ntimeout = 8080\n"
YAML = "version: 2\nspec:\n  replicas: 2\n  image: web:2\n"


@pytest.fixture
def repo(pipeline_proj):
    (pipeline_proj / "greet.py").write_text(GREET)
    (pipeline_proj / "app.ini").write_text(INI)
    (pipeline_proj / "deploy.yaml").write_text(YAML)
    return pipeline_proj


@pytest.mark.parametrize("prompt, file, old, new", [
    ("greet.py says 'Helo' instead of 'Hello'. Fix the typo.", "greet.py", "Helo", "Hello"),
    ("Use 'Hello' instead of 'Helo' in greet.py.", "greet.py", "Helo", "Hello"),  # the file says which is old
    ('In greet.py the word "Helo" should be "Hello".', "greet.py", "Helo", "Hello"),
    ("Change `localhost` to `0.0.0.0` in app.ini.", "app.ini", "localhost", "0.0.0.0"),
    ("Change the port in app.ini from 8080 to 9090.", "app.ini", "8080", "9090"),  # the line that says port
    ("In deploy.yaml, raise the number of replicas from 2 to 5.", "deploy.yaml", "2", "5"),
])
def test_the_change_the_request_spells_out(repo, prompt, file, old, new):
    found = plan_replace(prompt, [repo / file])
    assert (found.old, found.new, found.places) == (old, new, 1)
    before = (repo / file).read_text()
    after = found.texts[repo / file]
    changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines()) if a != b]
    assert len(changed) == 1 and changed[0][1] == changed[0][0].replace(old, new, 1)


@pytest.mark.parametrize("prompt, file", [
    ("Set 'port' to '9090' in app.ini.", "app.ini"),  # a key named, not a value to replace
    ("Change 'host' to 'hostname' in app.ini.", "app.ini"),  # the text stands as a key
    ("Copy the setting from host to port in app.ini.", "app.ini"),  # not a change of a value
    ("Rename 'greet' to 'hello' in greet.py.", "greet.py"),  # rename.py's business
    ("greet.py says 'Hi' instead of 'Hey'.", "greet.py"),  # neither is in the file
    ("Change the version in deploy.yaml from 2 to 3.", "deploy.yaml"),  # three 2s; "version" is on one line... of two
    ("Move the timeout in app.ini from 8080 to 9090.", "app.ini"),
    ("greet.py uses 'print' instead of 'log'.", "greet.py"),  # a name in code: rename.py's, with its uses
])
def test_changes_left_to_the_model(repo, prompt, file):
    if "version" in prompt:
        (repo / file).write_text("version: 2\nspec:\n  version: 2\n")  # two lines say version: which one is meant?
    assert plan_replace(prompt, [repo / file]) is None


def test_the_replacement_is_written_and_checked_without_the_model(repo, pipeline_agent):
    agent, engine, steps = pipeline_agent(repo, [])
    result = agent.run("greet.py says 'Helo' instead of 'Hello'. Fix the typo.")
    assert engine.requests == []
    assert ("replace", "Replaced 'Helo' with 'Hello' in greet.py (1 place)") in steps
    assert result.text.startswith("Replaced 'Helo' with 'Hello' in greet.py (1 place)")
    assert (repo / "greet.py").read_text() == GREET.replace("Helo", "Hello")


def test_a_replacement_its_check_fails_is_undone_and_the_model_edits(repo, pipeline_agent):
    (repo / "test_greet.py").write_text("from greet import greet\n\n\ndef test_it():\n"
                                        "    assert greet('x') == 'Helo, x!'\n")
    fixed = GREET.replace("Helo", "Hello")
    agent, engine, steps = pipeline_agent(repo, [{"text": f"```python\n{fixed}```"}])
    agent.driver.config.repairs = 0
    agent.run("greet.py says 'Helo' instead of 'Hello'. Fix the typo; test_greet.py must pass.")
    assert [d for s, d in steps if s == "retry"][0].startswith("the replace: `python -m pytest -q -x test_greet.py`")
    assert engine.requests  # the model's edit step ran after it
