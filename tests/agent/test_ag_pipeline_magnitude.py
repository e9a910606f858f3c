"""A wrong number with a rough size given in the request ("for a shipment of about 12 kilograms"): a change that
leaves it as far from that size is no fix. Real files and script runs, the scripted engine."""
from agent.pipeline.checks import not_fixed
from agent.pipeline.magnitude import stated_size, still_far
from agent.pipeline.mutations import function_mutants

UNITS = '"""Weights."""\n\n\ndef kg(grams):\n    """`grams` in kilograms."""\n    return grams * 1000\n'
SHIPMENT = ('"""The shipment\'s total weight."""\nfrom units import kg\n\nPARCELS = [2500, 4300, 5600]\n\n\n'
            'def main():\n    total = 0\n    for grams in PARCELS:\n        total += kg(grams)\n'
            '    print(f"Parcels: {len(PARCELS)}")\n    print(f"Total weight: {total:,.2f} kg")\n\n\nmain()\n')
REQUEST = ('python shipment.py prints the wrong weight: "Total weight: 12,400,000.00 kg" for a shipment that weighs '
           'about 12 kilograms. Please fix it.')


def test_the_size_is_read_in_words_or_figures():
    assert stated_size("a trip that cost about a thousand euros") == 1000
    assert stated_size("it took roughly 1,500 ms") == 1500
    assert stated_size("the sum is around 2.5 hundred") == 250
    assert stated_size("the table weighs close to a million rows") == 1_000_000
    assert stated_size("it took about an hour") is None and stated_size("prints 12 kg") is None
    assert stated_size('prints "Total: 0" for about 40 orders') is None  # the size of an input, not of the value


def test_a_number_still_far_from_the_size_is_reported_and_a_near_one_is_not():
    wrong = "Total weight: 12,400,000.00 kg"
    label = "Total weight:"
    assert still_far(REQUEST, wrong, "Parcels: 3\nTotal weight: -12,400,000.00 kg\n") == \
        (label, "Total weight: -12,400,000.00 kg")
    assert still_far(REQUEST, wrong, "Parcels: 3\nTotal weight: 12,400.00 kg\n") == \
        (label, "Total weight: 12,400.00 kg")
    assert still_far(REQUEST, wrong, "Parcels: 3\nTotal weight: 12.40 kg\n") is None
    assert still_far(REQUEST, wrong, "Parcels: 3\n") == (label, "")  # the line deleted: no fix either
    assert still_far(REQUEST, "", "Total weight: 0.00 kg\n") == (label, "Total weight: 0.00 kg")  # after "prints the"
    # no size given, or the quoted number already near it: nothing to say
    assert still_far("python shipment.py prints the wrong total.", wrong, "Total weight: 1.00 kg") is None
    assert still_far('prints "Total weight: 13.00 kg", which weighs about 12 kilograms', "Total weight: 13.00 kg",
                     "Total weight: 99.00 kg") is None


def test_a_clean_run_of_the_reported_script_still_far_off_is_no_fix():
    before = "Parcels: 3\nTotal weight: 12,400,000.00 kg\n"
    far = "Parcels: 3\nTotal weight: -12,400,000.00 kg\n"
    assert "still far" in not_fixed("python shipment.py", far, "python shipment.py", before, REQUEST)
    assert "no longer has the `Total weight:` line" in not_fixed("python shipment.py", "Parcels: 3\n",
                                                                 "python shipment.py", before, REQUEST)
    assert not_fixed("python shipment.py", "Parcels: 3\nTotal weight: 12.40 kg\n", "python shipment.py", before,
                     REQUEST) == ""
    assert not_fixed("python other.py", far, "python shipment.py", before, REQUEST) == ""  # not the reported run


def test_a_product_and_a_quotient_are_exchanged():
    found = [(line, a, b) for line, a, b, _ in function_mutants(UNITS, ["kg"])]
    assert (6, "grams * 1000", "grams / 1000") in found
    assert (1, "a / b", "a * b") in [(1, a, b) for _, a, b, _ in function_mutants("def f(a, b):\n    return a / b\n",
                                                                                   ["f"])]


def test_the_change_that_brings_the_number_near_the_size_is_the_fix(pipeline_proj, pipeline_agent):
    (pipeline_proj / "units.py").write_text(UNITS)
    (pipeline_proj / "shipment.py").write_text(SHIPMENT)
    miss = SHIPMENT.replace(":,.2f}", ":,.1f}")  # the model's rounds change the script's format; the bug: units.py
    agent, _, steps = pipeline_agent(pipeline_proj, [{"text": f"```python\n{miss}```"}] * 4, mutants=True)
    result = agent.run(REQUEST)
    # `total += kg(grams)` -> `total -= ...` changes the output too, but leaves it as far from 12 kg
    assert result.text.startswith("Changed units.py (line 6: `grams * 1000` -> `grams / 1000`)"), "\n".join(map(str, steps))
    assert (pipeline_proj / "shipment.py").read_text() == SHIPMENT
