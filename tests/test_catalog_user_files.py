"""Users extend the catalog with their own YAML files (--catalog DIR or TRAINRIG_CATALOG)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from trainrig import load_job
from trainrig.catalog import load_catalog
from trainrig.errors import TrainrigError

CUSTOM_GPU = textwrap.dedent("""
    gpus:
    - id: LAB-ACCEL-48GB
      name: Lab accelerator 48GB
      aliases: [labaccel]
      vendor: nvidia
      architecture: Custom
      form_factor: pcie
      memory_gib: 48
      memory_type: GDDR6
      memory_bandwidth_gbs: 960
      memory_bus_width_bits: 384
      peak_tflops: {fp32: 90, tf32: 180, fp16: 360, bf16: 360}
      compute_units: 100
      boost_clock_mhz: 2000
      tdp_w: 300
      pcie_gen: 4
      pcie_lanes: 16
      year: 2025
      sources: ["our own measurement sheet"]
""")


def test_a_directory_of_user_files_adds_gpus(tmp_path):
    (tmp_path / "lab.yaml").write_text(CUSTOM_GPU)
    catalog = load_catalog((str(tmp_path),))
    gpu = catalog.gpus.get("labaccel").entry
    assert gpu.id == "LAB-ACCEL-48GB" and gpu.peak("bf16") == 360
    assert "H100-SXM5-80GB" in catalog.gpus.entries  # the packaged ones stay
    job = load_job({"model": "llama3-8b", "hardware": {"gpu": "LAB-ACCEL-48GB", "n_gpus": 1},
                    "training": {"global_batch": 4, "method": "qlora"}}, (str(tmp_path),))
    assert job.hardware.gpu.memory_gib == 48


def test_trainrig_catalog_environment_variable_reaches_the_cli(tmp_path):
    (tmp_path / "lab.yaml").write_text(CUSTOM_GPU)
    env = {"TRAINRIG_CATALOG": str(tmp_path), "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-m", "trainrig", "gpus", "--json"], capture_output=True, text=True,
                            env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "LAB-ACCEL-48GB" in {g["id"] for g in json.loads(result.stdout)}


def test_a_bad_user_entry_names_its_file_and_field(tmp_path):
    (tmp_path / "broken.yaml").write_text(CUSTOM_GPU.replace("memory_gib: 48", "memory_gib: -1"))
    with pytest.raises(TrainrigError) as error:
        load_catalog((str(tmp_path),))
    assert "broken.yaml" in str(error.value) and "memory_gib" in str(error.value)


def test_a_missing_catalog_directory_is_an_error(tmp_path):
    with pytest.raises(TrainrigError, match="does not exist"):
        load_catalog((str(tmp_path / "nope"),))


def test_exponent_numbers_in_yaml_are_floats_as_in_yaml_1_2():
    from trainrig.catalog.yaml_text import load_yaml

    data = load_yaml("a: 1.0e11\nb: 2e12\nc: -3.5E-2\nd: 7\ne: 1e\nf: '2e3'\ng: 1.5e+13\n")
    assert data == {"a": 1.0e11, "b": 2e12, "c": -3.5e-2, "d": 7, "e": "1e", "f": "2e3", "g": 1.5e13}
    assert isinstance(data["d"], int)



# --- conflicts (issue 13 item 12): an error naming both files, never a silent choice ----------------


def test_a_user_file_may_replace_a_packaged_entry_on_purpose(tmp_path):
    replaced = CUSTOM_GPU.replace("id: LAB-ACCEL-48GB", "id: T4").replace("aliases: [labaccel]", "aliases: []")
    (tmp_path / "t4.yaml").write_text(replaced)
    catalog = load_catalog((str(tmp_path),))
    assert catalog.gpus.get("T4").entry.memory_gib == 48


def test_two_user_files_with_the_same_id_are_an_error(tmp_path):
    (tmp_path / "a.yaml").write_text(CUSTOM_GPU)
    (tmp_path / "b.yaml").write_text(CUSTOM_GPU.replace("aliases: [labaccel]", "aliases: []"))
    with pytest.raises(TrainrigError) as error:
        load_catalog((str(tmp_path),))
    assert str(error.value) == (f"catalog: GPU id 'LAB-ACCEL-48GB' is defined twice, in {tmp_path / 'a.yaml'} and "
                                f"{tmp_path / 'b.yaml'}; keep one.")


def test_the_same_id_twice_in_one_file_is_an_error(tmp_path):
    twice = CUSTOM_GPU + CUSTOM_GPU.split("gpus:\n", 1)[1].replace("aliases: [labaccel]", "aliases: []")
    (tmp_path / "lab.yaml").write_text(twice)
    with pytest.raises(TrainrigError, match="is defined twice"):
        load_catalog((str(tmp_path),))


def test_a_user_alias_that_is_a_packaged_name_is_an_error(tmp_path):
    (tmp_path / "lab.yaml").write_text(CUSTOM_GPU.replace("aliases: [labaccel]", "aliases: [labaccel, h100]"))
    with pytest.raises(TrainrigError) as error:
        load_catalog((str(tmp_path),))
    assert str(error.value) == (f"catalog: {tmp_path / 'lab.yaml'} GPU 'LAB-ACCEL-48GB': the name 'h100' is already "
                                "H100-SXM5-80GB from packaged gpus.yaml; rename one.")


def test_a_user_id_that_is_a_packaged_alias_is_an_error(tmp_path):
    (tmp_path / "lab.yaml").write_text(CUSTOM_GPU.replace("id: LAB-ACCEL-48GB", "id: h100"))
    with pytest.raises(TrainrigError, match="the name 'h100' is already H100-SXM5-80GB"):
        load_catalog((str(tmp_path),))


def test_a_misspelled_section_is_an_error_with_a_suggestion(tmp_path):
    (tmp_path / "lab.yaml").write_text(CUSTOM_GPU.replace("gpus:", "gpu:"))
    with pytest.raises(TrainrigError) as error:
        load_catalog((str(tmp_path),))
    assert str(error.value) == (f"catalog: section 'gpu' in {tmp_path / 'lab.yaml'} is not a catalog section; "
                                "did you mean gpus?")


def test_an_offer_for_an_unknown_gpu_is_an_error(tmp_path):
    (tmp_path / "cloud.yaml").write_text(textwrap.dedent("""
        offers:
        - id: lab-cloud-x1
          name: Lab cloud x1
          provider: lab
          instance: x1
          gpu: H1000
          gpus_per_node: 8
          usd_per_gpu_hour: 2.0
          price_date: 2025-01-01
          sources: ["price sheet"]
    """))
    with pytest.raises(TrainrigError) as error:
        load_catalog((str(tmp_path),))
    message = str(error.value)
    assert message.startswith(f"catalog: {tmp_path / 'cloud.yaml'} offer 'lab-cloud-x1' gpu: unknown GPU 'H1000'")
    assert "did you mean" in message


def test_the_same_directory_twice_is_read_once(tmp_path, monkeypatch):
    (tmp_path / "lab.yaml").write_text(CUSTOM_GPU)
    monkeypatch.setenv("TRAINRIG_CATALOG", str(tmp_path))
    catalog = load_catalog((str(tmp_path),))  # in the variable and by --catalog: not a duplicate id
    assert "LAB-ACCEL-48GB" in catalog.gpus.entries


def test_a_catalog_path_that_is_a_file_says_so(tmp_path):
    (tmp_path / "lab.yaml").write_text(CUSTOM_GPU)
    with pytest.raises(TrainrigError, match=r"lab\.yaml is not a directory"):
        load_catalog((str(tmp_path / "lab.yaml"),))


def test_a_duplicate_key_in_a_catalog_file_names_file_and_line(tmp_path):
    (tmp_path / "lab.yaml").write_text(CUSTOM_GPU.replace("tdp_w: 300", "tdp_w: 300\n  tdp_w: 350"))
    with pytest.raises(TrainrigError, match=r"lab\.yaml is not valid YAML \(found duplicate key 'tdp_w' at line 17"):
        load_catalog((str(tmp_path),))


def test_packaged_files_are_parsed_once_per_process(tmp_path, monkeypatch):
    from trainrig.catalog import registry

    load_catalog()
    real = registry.load_data_file
    parsed = []
    monkeypatch.setattr(registry, "load_data_file", lambda path, field: parsed.append(path) or real(path, field))
    (tmp_path / "lab.yaml").write_text(CUSTOM_GPU)
    load_catalog((str(tmp_path),))  # a new set of directories: only the user's file is new
    assert parsed == [tmp_path / "lab.yaml"]
