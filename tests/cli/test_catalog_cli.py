"""`trainrig catalog`: every section listed as a table and as JSON; errors point to commands that exist."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from trainrig.catalog import load_catalog
from trainrig.cli.commands.catalog import SECTIONS
from trainrig.cli.main import app
from trainrig.errors import TrainrigError

runner = CliRunner()


@pytest.mark.parametrize("section", list(SECTIONS))
def test_every_section_lists_its_entries_as_a_table_and_as_json(section):
    entries = list(getattr(load_catalog(), SECTIONS[section][0]))
    table = runner.invoke(app, ["catalog", section], env={"COLUMNS": "250"})
    assert table.exit_code == 0, table.output
    assert entries[0].id[:8] in table.output  # a narrow terminal may shorten a long id
    listed = json.loads(runner.invoke(app, ["catalog", section, "--json"]).output)
    assert [e["id"] for e in listed] == [e.id for e in entries]


def test_without_a_section_it_counts_every_section():
    counts = json.loads(runner.invoke(app, ["catalog", "--json"]).output)
    assert {name: counts[attribute] for name, (attribute, _) in SECTIONS.items()} == {
        name: len(list(getattr(load_catalog(), attribute))) for name, (attribute, _) in SECTIONS.items()}


def test_help_names_every_section():
    text = runner.invoke(app, ["catalog", "--help"], env={"COLUMNS": "250"}).output
    for section in SECTIONS:
        assert section in text


def test_a_misspelled_section_is_one_sentence_with_a_suggestion_and_exit_2():
    result = runner.invoke(app, ["catalog", "link"])
    assert result.exit_code == 2
    assert "did you mean links?" in result.output


@pytest.mark.parametrize("attribute", sorted({a for a, _ in SECTIONS.values()} - {"frameworks"}))
def test_an_unknown_name_points_to_a_listing_command_that_exists(attribute):
    section = getattr(load_catalog(), attribute)
    with pytest.raises(TrainrigError) as error:
        section.get("zzzz-no-such-thing-qqqq")
    message = str(error.value)
    assert "`trainrig " in message or "valid: " in message  # a short section lists its ids instead
    if "`trainrig " in message:  # long sections name the command that lists them
        command = message.split("`trainrig ")[1].split("`")[0].split()
        result = runner.invoke(app, command)
        assert result.exit_code == 0, (command, result.output)
