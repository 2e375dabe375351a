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

