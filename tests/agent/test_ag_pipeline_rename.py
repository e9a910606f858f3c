"""The harness's rename of a Python identifier across the project (agent/pipeline/rename.py, with rope): real files,
real pytest runs, the scripted engine where the model would write."""
import pytest

from agent.pipeline.rename import plan_rename

USERS = 'USERS = {1: "ada"}\n\n\ndef get_usr(uid):\n    """get_usr(uid) -> the name."""\n    return USERS[uid]\n'
APP = "import users\nfrom users import get_usr\n\nprint(get_usr(1), users.get_usr(1))\n"
SHOP = ("class Cart:\n    def __init__(self):\n        self.items = []\n\n    def compute_sum(self):\n"
        "        return sum(self.items)\n\n\ndef due(cart, coupon=0):\n    return cart.compute_sum() - coupon\n")
IMAGING = ("def resize(size, width, keep_ratio=True):\n    return size if keep_ratio else width\n\n\n"
           "def crop(size, keep_ratio=False):\n    return size\n\n\nprint(resize(1, 2, keep_ratio=False), crop(3))\n")


@pytest.fixture
def repo(pipeline_proj):
    for name, text in {"users.py": USERS, "app.py": APP, "shop.py": SHOP, "imaging.py": IMAGING}.items():
        (pipeline_proj / name).write_text(text)
    return pipeline_proj.resolve()


def rename(repo, prompt, *named):
    return plan_rename(prompt, repo, [repo / n for n in named])


def test_a_function_is_renamed_where_it_is_defined_imported_and_called(repo):
    r = rename(repo, "Rename the function get_usr to get_user everywhere.", "users.py")
    assert list(r.texts) == [repo / "users.py", repo / "app.py"]  # the definition's file first
    assert r.texts[repo / "users.py"] == USERS.replace("get_usr", "get_user")  # the docstring too
    assert r.texts[repo / "app.py"] == APP.replace("get_usr", "get_user")
    assert r.summary(lambda p: p.name) == "Renamed get_usr to get_user in users.py, app.py"


def test_a_method_is_renamed_at_calls_on_values_of_unknown_type_when_the_project_defines_it_once(repo):
    r = rename(repo, "Rename the Cart method compute_sum to subtotal (shop.py) and update its callers.")
    assert r.texts == {repo / "shop.py": SHOP.replace("compute_sum", "subtotal")}
    (repo / "other.py").write_text("class Till:\n    def compute_sum(self):\n        return 0\n\n\n"
                                   "def total(t):\n    return t.compute_sum()\n")
    r = rename(repo, "Rename the Cart method compute_sum to subtotal.")
    # Two classes define it: a call on a value of unknown type is left as it was.
    assert r.texts[repo / "shop.py"] == SHOP.replace("def compute_sum", "def subtotal")
    assert repo / "other.py" not in r.texts


def test_a_parameter_is_renamed_with_the_keyword_arguments_of_its_calls(repo):
    r = rename(repo, "Rename the keep_ratio parameter of resize in imaging.py to preserve_aspect.")
    assert r.texts[repo / "imaging.py"] == IMAGING.replace(
        "width, keep_ratio=True):\n    return size if keep_ratio", "width, preserve_aspect=True):\n    return size if "
        "preserve_aspect").replace("keep_ratio=False), crop", "preserve_aspect=False), crop")
    # Two functions have such a parameter and the request does not say which: the model's call.
    assert rename(repo, "Rename the parameter keep_ratio to preserve_aspect.", "imaging.py") is None


@pytest.mark.parametrize("prompt", [
    "Rename get_usr to get_user; do not change app.py.",  # a file to leave alone would change
    "Rename the function fetch_all to load_all.",  # nothing defines it
    "Rename users.py to people.py.",  # a module, not an identifier
    "Rename get_usr to get_usr.",
])
def test_renames_the_harness_leaves_to_the_model(repo, prompt):
    assert rename(repo, prompt, "users.py") is None


def test_a_test_file_that_uses_the_name_is_left_alone_when_the_request_keeps_the_tests(repo):
    (repo / "test_users.py").write_text("from users import get_usr\n\n\ndef test_it():\n    assert get_usr(1) == 'ada'\n")
    assert repo / "test_users.py" in rename(repo, "Rename get_usr to get_user.", "users.py").texts
    assert rename(repo, "Rename get_usr to get_user; don't change the tests.", "users.py") is None


def test_the_rename_is_written_and_checked_without_the_model(repo, pipeline_agent):
    (repo / "test_users.py").write_text("from users import get_usr\n\n\ndef test_it():\n    assert get_usr(1) == 'ada'\n")
    agent, engine, steps = pipeline_agent(repo, [])
    result = agent.run("Rename the function get_usr in users.py to get_user and update its callers.")
    assert result.text == ("Renamed get_usr to get_user in users.py, app.py, test_users.py; "
                           "`python -m pytest -q -x test_users.py` passed.")
    assert engine.requests == [] and ("rename", "Renamed get_usr to get_user in users.py, app.py, test_users.py") in steps
    assert "get_usr" not in (repo / "users.py").read_text() + (repo / "app.py").read_text()


def test_a_rename_its_check_fails_is_undone_and_the_model_edits(repo, pipeline_agent):
    (repo / "test_users.py").write_text("import users\n\n\ndef test_old_name_kept():\n"
                                        "    assert 'get_' + 'usr' in dir(users)\n")
    agent, engine, steps = pipeline_agent(repo, [{"text": f"```python\n{USERS}```"}])
    agent.driver.config.repairs = 0
    agent.run("Rename the function get_usr in users.py to get_user.")
    assert [d for s, d in steps if s == "retry"][0].startswith("the rename: `python -m pytest -q -x test_users.py` "
                                                                "failed (")
    assert (repo / "users.py").read_text() == USERS and (repo / "app.py").read_text() == APP
    assert engine.requests  # the model's edit step ran after it
