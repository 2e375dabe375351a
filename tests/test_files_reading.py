"""Files users hand trainrig (issue 13 items 10, 11, 12 and 14): anything that is not a regular UTF-8
file of bounded size ends in one sentence naming it, without blocking, a traceback or a long parse."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from trainrig.catalog import files, load_catalog
from trainrig.catalog.files import MAX_FILE_BYTES, load_data_file, read_text
from trainrig.catalog.job_file import load_profile, read_job_file
from trainrig.errors import TrainrigError

JOB = "model: llama3-8b\nhardware: {gpu: h100, n_gpus: 8}\n"


def refused(call, *args) -> TrainrigError:
    with pytest.raises(TrainrigError) as error:
        call(*args)
    assert "\n" not in str(error.value)
    return error.value


def test_a_utf16_job_file_is_one_sentence(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(JOB, encoding="utf-16")
    error = refused(read_job_file, path)
    assert error.field == "job" and error.message == f"{path} is UTF-16 text; save it as UTF-8."


def test_a_binary_job_file_is_one_sentence(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_bytes(bytes(range(256)))
    assert refused(read_job_file, path).message == f"{path} is a binary file, not UTF-8 text."


def test_a_latin1_job_file_names_the_byte(tmp_path):
    path = tmp_path / "job.json"
    path.write_bytes('{"model": "caf\xe9"}'.encode("latin-1"))
    assert "is not UTF-8 text (byte 0xe9 at offset 14)" in refused(read_job_file, path).message


def test_a_utf8_byte_order_mark_is_accepted(tmp_path):
    for name in ("job.yaml", "job.json"):
        path = tmp_path / name
        path.write_text('{"model": "llama3-8b", "hardware": {"gpu": "h100"}}', encoding="utf-8-sig")
        assert read_job_file(path)["model"] == "llama3-8b"


def test_a_utf16_profile_file_is_one_sentence(tmp_path):
    path = tmp_path / "profile.json"
    path.write_text("{}", encoding="utf-16")
    error = refused(load_profile, str(path))
    assert error.field == "hardware.profile" and "UTF-16" in error.message


def test_a_fifo_job_file_is_refused_without_blocking(tmp_path):
    path = tmp_path / "job.yaml"
    os.mkfifo(path)
    assert refused(read_job_file, path).message == f"{path} is a FIFO (named pipe), not a regular file."


def test_a_directory_given_as_the_job_file_says_it_is_a_directory(tmp_path):
    assert refused(read_job_file, tmp_path).message == f"{tmp_path} is a directory, not a regular file."


def test_a_missing_job_file_still_does_not_exist(tmp_path):
    assert refused(read_job_file, tmp_path / "nope.yaml").message == f"file {tmp_path / 'nope.yaml'} does not exist."


def test_a_dangling_symlink_says_so(tmp_path):
    (tmp_path / "job.yaml").symlink_to(tmp_path / "gone.yaml")
    assert "symbolic link to a file that does not exist" in refused(read_job_file, tmp_path / "job.yaml").message


def test_a_file_past_the_size_cap_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "job.yaml"
    with path.open("wb") as f:
        f.truncate(60 * 2**20)  # sparse: 60 MiB on paper, nothing on disk
    message = refused(read_job_file, path).message
    assert message.startswith(f"{path} is larger than 4 MiB (60.0 MiB or more)")


def test_the_size_cap_holds_for_a_file_that_grows(tmp_path, monkeypatch):
    path = tmp_path / "job.yaml"
    path.write_text(JOB)
    real_fstat = os.fstat
    # a file whose stat size is stale (a growing log, /proc): the read itself stops past the cap
    monkeypatch.setattr(files.os, "fstat", lambda fd: os.stat_result((*real_fstat(fd)[:6], 0, *real_fstat(fd)[7:])))
    monkeypatch.setattr(files, "MAX_FILE_BYTES", 10)
    assert "is larger than" in refused(read_text, path, "job").message


def test_the_size_cap_is_a_few_mib():
    assert MAX_FILE_BYTES == 4 * 2**20


def test_a_json_key_written_twice_is_an_error(tmp_path):
    path = tmp_path / "job.json"
    path.write_text('{"model": "llama3-8b", "hardware": {"gpu": "h100", "gpu": "a100"}}')
    assert refused(read_job_file, path).message == f"{path} is not valid JSON (duplicate key 'gpu')."


@pytest.mark.parametrize("depth", [101, 5000])
def test_deep_json_is_one_sentence(tmp_path, depth):
    path = tmp_path / "job.json"
    path.write_text("[" * depth + "]" * depth)
    assert refused(load_data_file, path, "job").message == f"{path} nests deeper than 100 levels."


def test_a_list_of_millions_of_values_is_refused(tmp_path):
    # 3 million items as a flow list need 6 MB: the size cap stops it before parsing;
    # the value cap (1,000,000) stops the 2 million that would fit in 4 MiB
    path = tmp_path / "job.yaml"
    path.write_text("[" + "1," * 3_000_000 + "1]")
    assert "is larger than 4 MiB" in refused(read_job_file, path).message


def test_the_value_cap_applies_to_files(tmp_path, monkeypatch):
    from trainrig.catalog import yaml_text

    monkeypatch.setattr(yaml_text, "MAX_VALUES", 1000)
    path = tmp_path / "job.yaml"
    path.write_text("[" + "1," * 2000 + "1]")
    assert refused(read_job_file, path).message == f"{path} holds more than 1,000 values (aliases expanded)."


# --- inside a catalog directory -------------------------------------------------------------------


def test_a_fifo_in_a_catalog_directory_is_refused(tmp_path):
    os.mkfifo(tmp_path / "lab.yaml")
    error = refused(load_catalog, (str(tmp_path),))
    assert error.field == "catalog"
    assert error.message == f"{tmp_path / 'lab.yaml'} is a FIFO (named pipe), not a regular file."


def test_a_directory_named_yaml_in_a_catalog_directory_is_refused(tmp_path):
    (tmp_path / "more.yaml").mkdir()
    message = refused(load_catalog, (str(tmp_path),)).message
    assert message == f"{tmp_path / 'more.yaml'} is a directory, not a regular file."


def test_a_symlink_loop_in_a_catalog_directory_is_refused(tmp_path):
    (tmp_path / "a.yaml").symlink_to(tmp_path / "b.yaml")
    (tmp_path / "b.yaml").symlink_to(tmp_path / "a.yaml")
    assert refused(load_catalog, (str(tmp_path),)).message == f"{tmp_path / 'a.yaml'} is a symbolic link loop."


def test_an_unreadable_catalog_file_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "lab.yaml"
    path.write_text("gpus: []\n")
    real_open = os.open

    def deny(target, *args, **kwargs):  # chmod 000 does not stop root, who runs CI here
        if Path(target) == path:
            raise PermissionError(errno.EACCES, "Permission denied", str(target))
        return real_open(target, *args, **kwargs)

    monkeypatch.setattr(files.os, "open", deny)
    assert refused(load_catalog, (str(tmp_path),)).message == f"{path} cannot be read (permission denied)."


def test_a_binary_catalog_file_is_refused(tmp_path):
    (tmp_path / "lab.yaml").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    assert "is a binary file" in refused(load_catalog, (str(tmp_path),)).message


def test_a_utf16_catalog_file_is_refused(tmp_path):
    (tmp_path / "lab.yaml").write_text("gpus: []\n", encoding="utf-16")
    assert "is UTF-16 text" in refused(load_catalog, (str(tmp_path),)).message


def test_a_deep_catalog_file_is_refused(tmp_path):
    (tmp_path / "lab.yaml").write_text("gpus: " + "[" * 900 + "]" * 900 + "\n")
    assert "nests deeper than 100 levels" in refused(load_catalog, (str(tmp_path),)).message


def test_a_fifo_given_as_a_cases_file_is_named_a_fifo(tmp_path):
    from trainrig.catalog.cases import load_cases

    os.mkfifo(tmp_path / "runs.yaml")
    error = refused(load_cases, [tmp_path / "runs.yaml"])
    assert error.field == "cases"
    assert error.message == f"{tmp_path / 'runs.yaml'} is a FIFO (named pipe), not a regular file."


def test_a_missing_cases_file_does_not_exist(tmp_path):
    from trainrig.catalog.cases import load_cases

    assert refused(load_cases, [tmp_path / "nope.yaml"]).message == f"file {tmp_path / 'nope.yaml'} does not exist."
