"""Slips in a regular expression: the variants offered (regex_mutations.py), their spelling in the file, and a near
miss fixed by one in a real pytest run (the scripted engine writes the candidate)."""
import re

from agent.pipeline.mutations import function_mutants
from agent.pipeline.regex_mutations import pattern_variants

WORDS = ('"""Words of a note."""\nimport re\n\nWORD = re.compile(r"\\b[a-z\'-]+\\b")\n\n\ndef words(text):\n'
         '    """Runs of letters, lower case; an apostrophe inside belongs to the word."""\n'
         '    return WORD.findall(text.lower())\n')
WORDS_TESTS = ('from words import words\n\n\ndef test_plain():\n    assert words("Go go") == ["go", "go"]\n\n\n'
               'def test_apostrophe():\n    assert words("Don\'t stop") == ["don\'t", "stop"]\n\n\n'
               'def test_hyphens_and_digits_separate():\n'
               '    assert words("e-mail x2 y") == ["e", "mail", "x", "y"]\n')


def test_a_class_member_a_boundary_or_an_anchor_goes_one_at_a_time_then_two_together():
    found = pattern_variants(r"\b[a-z'-]+\b")
    assert r"\b[a-z']+\b" in found and r"[a-z'-]+\b" in found and r"[a-z'-]+" in found  # one removal
    assert "[a-z']+" in found  # the hyphen and both boundaries: two removals
    assert found.index(r"\b[a-z']+\b") < found.index("[a-z']+")
    assert r"\b[a-z'-]*\b" in found and r"\b[a-z'-]+?\b" in found and r"\b[^a-z'-]+\b" in found
    assert r"\b[0-9a-z'-]+\b" in found  # added at the class's start: a trailing `-` would make a range
    assert r"\b[a-z'-0-9]+\b" not in found and r"\b[a-z'-]+\b" not in found
    assert pattern_variants(r"^(\d+)h(?:(\d+)m)?$")[:2] == [r"(\d+)h(?:(\d+)m)?$", r"^(\d+)h(?:(\d+)m)?"]
    assert r"^(\d+)h(?:(\d+)m)$" in pattern_variants(r"^(\d+)h(?:(\d+)m)?$")  # the group's `?:` is kept
    for pattern in (r"\b[a-z'-]+\b", r"\[([^\]]+)\]\((.*?)\)", r"#([A-Za-z]\w*)", "[", "a{2,}?"):
        for variant in pattern_variants(pattern):
            re.compile(variant)


def test_the_pattern_keeps_its_spelling_or_is_written_so_it_reads_back_the_same():
    source = ('import re\n\n\ndef tags(text):\n    return re.findall(r"#([a-z_]+)", text)\n\n\n'
              'def quoted(text):\n    return re.sub("\\\\b[\\"x]", "", text)\n')
    found = [(line, before, after) for line, before, after, _ in function_mutants(source, ["tags", "quoted"])]
    assert (5, 'r"#([a-z_]+)"', 'r"#([a-z]+)"') in found
    assert (5, 'r"#([a-z_]+)"', 'r"#([0-9a-z_]+)"') in found
    dropped = [after for line, before, after in found if line == 9 and before.startswith('"')]
    assert "'[\"x]'" in dropped  # \b dropped; the quote inside made the original's spelling unusable
    for _, _, _, content in function_mutants(source, ["tags", "quoted"]):
        compile(content, "tags.py", "exec")


def test_a_pattern_bound_at_module_level_and_used_in_the_function_is_changed_where_it_is_written():
    found = [(line, after) for line, _, after, _ in function_mutants(WORDS, ["words"])]
    assert (4, 'r"[a-z\']+"') in found


def test_a_near_miss_whose_pattern_keeps_hyphens_and_boundaries_is_fixed_in_a_real_run(pipeline_proj,
                                                                                        pipeline_agent):
    (pipeline_proj / "words.py").write_text(WORDS.split("WORD =")[0] + "def words(text):\n"
                                            "    raise NotImplementedError\n")
    (pipeline_proj / "test_words.py").write_text(WORDS_TESTS)
    agent, _, steps = pipeline_agent(pipeline_proj, [{"candidates": [f"{WORDS}```", "x = (```"]}], tries=2,
                                     mutants=True)
    agent.driver.config.repairs = 0
    result = agent.run("Implement the stub in words.py so that the tests in test_words.py pass.")
    assert result.text.startswith("Changed words.py (line 4: "), steps
    assert 'WORD = re.compile(r"\\b[a-z\']+")' in (pipeline_proj / "words.py").read_text()  # two removals
