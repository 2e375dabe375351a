"""docs/job-file.md is generated from the specs; these tests keep the committed file in step."""

from __future__ import annotations

import re
from pathlib import Path

from trainrig.catalog.job_file import HARDWARE_KEYS
from trainrig.specs import ModelSpec, TrainingSpec
from trainrig.specs.reference import job_file_reference_markdown

DOC = Path(__file__).resolve().parents[1] / "docs" / "job-file.md"
REGENERATE = "docs/job-file.md is out of date with the specs; run `python scripts/gen_job_file_doc.py`."


def _section(markdown: str, title: str) -> str:
    """The text under `## title` up to the next second-level heading."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", markdown, re.MULTILINE | re.DOTALL)
    assert match, f"docs/job-file.md has no '## {title}' section"
    return match.group(1)


def _table_fields(section: str) -> set[str]:
    return set(re.findall(r"^\| `([a-z0-9_]+)` \|", section, re.MULTILINE))


def test_committed_reference_matches_the_specs():
    assert DOC.is_file(), REGENERATE
    assert DOC.read_text() == job_file_reference_markdown(), REGENERATE


def test_every_training_field_has_a_row():
    rows = _table_fields(_section(job_file_reference_markdown(), "training"))
    missing = set(TrainingSpec.model_fields) - rows
    assert not missing, f"training fields missing from the reference: {sorted(missing)}"


def test_model_and_hardware_keys_have_rows():
    text = job_file_reference_markdown()
    assert set(ModelSpec.model_fields) <= _table_fields(_section(text, "model"))
    # `pcie` is the loader's other spelling of host_link, documented in that row
    assert HARDWARE_KEYS - {"pcie"} <= _table_fields(_section(text, "hardware"))


def test_the_set_and_what_if_keys_are_listed_in_help_and_in_the_reference():
    from trainrig.catalog.job_file import CHANGE_ALIASES, HARDWARE_KEYS
    from trainrig.cli.common import SET_HELP

    reference = (Path(__file__).resolve().parents[1] / "docs" / "job-file.md").read_text()
    section = reference.split("## Keys for --set and --what-if")[1].split("\n## ")[0]
    for key in [*CHANGE_ALIASES, *HARDWARE_KEYS]:
        assert f"`{key}`" in section, key
    for short in CHANGE_ALIASES:
        assert short in SET_HELP, short
