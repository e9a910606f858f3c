"""PipelineConfig: what the task pipeline may spend on a request, from the model profile (session/builder.py)."""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class PipelineConfig:
    repairs: int = 2  # tries after the first one fails its check
    whole_file_max_lines: int = 250  # longer files are edited with one Edit call instead of rewritten
    tries: int = 1  # a retry samples this many candidates together and keeps one that passes (engines with `sample`)
    batches: int = 1  # a round whose candidates all failed draws another `tries` of them, up to this many times
    stub_batches: int = 1  # the same for a fresh look at a file with stubs (windows.stub_starts)
    oracle: bool = False  # trace a failing test and ask the model what its callees return, to pick the suspect
    focus: bool = False  # a sampled round's nearest miss: the definition its failing test reaches is written again
    fresh: bool = False  # a failed sampled first round is followed by one sampled in the bare shape (mt.fresh_look)
    mutants: bool = False  # no round fixed a reproduced failure: one-expression changes are checked (mutants.py)
