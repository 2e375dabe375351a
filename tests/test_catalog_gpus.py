"""The packaged GPU catalog: every DESIGN id present, figures dense and plausible, names resolve."""

from __future__ import annotations

import math

import pytest

from trainrig.catalog import load_catalog
from trainrig.catalog.registry import CATALOG_ENV, normalize_name
from trainrig.errors import TrainrigError

DESIGN_IDS = (
    "V100-SXM2-32GB",
    "V100-SXM3-32GB",
    "V100-PCIE-32GB",
    "A100-SXM4-40GB",
    "A100-SXM4-80GB",
    "A100-PCIE-80GB",
    "H100-SXM5-80GB",
    "H100-PCIE-80GB",
    "H100-NVL-94GB",
    "H200-SXM5-141GB",
    "H20",
    "B200",
    "L40S",
    "L4",
    "A10",
    "A40",
    "RTX-A6000",
    "RTX-6000-ADA",
    "RTX-3090",
    "RTX-4090",
    "RTX-5090",
    "T4",
    "MI100",
    "MI210",
    "MI250X",
    "MI300X",
    "MI325X",
    "GAUDI2",
    "GAUDI3",
)

SCALE_UP_IDS = {
    "nvlink2",
    "nvlink3",
    "nvlink4",
    "nvlink5",
    "nvlink-bridge",
    "infinity-fabric-2",
    "infinity-fabric-3",
    "gaudi2-roce",
    "gaudi3-roce",
}

PCIE_ONLY = ["L40S", "L4", "A10", "T4", "RTX-4090", "RTX-5090", "RTX-6000-ADA", "V100-PCIE-32GB"]

# Dense FP16/BF16 (FP32 accumulate) FLOP per clock per tensor core / matrix core / MME, from the
# architecture whitepapers. peak = matrix_cores x clock x this, so a sparse figure (2x), a wrong
# unit count or a wrong clock shows up as a mismatch. B200 (clock not published) and H20
# (firmware-capped peaks) have no such relation and are left out.
DENSE_FLOP_PER_CLK_PER_MATRIX_CORE = {
    "V100-SXM2-32GB": 128,
    "V100-SXM3-32GB": 128,
    "V100-PCIE-32GB": 128,
    "T4": 128,
    "A100-SXM4-40GB": 512,
    "A100-SXM4-80GB": 512,
    "A100-PCIE-80GB": 512,
    "A10": 256,
    "A40": 256,
    "RTX-A6000": 256,
    "RTX-3090": 128,  # GeForce: half-rate FP32 accumulate
    "H100-SXM5-80GB": 1024,
    "H100-PCIE-80GB": 1024,
    "H100-NVL-94GB": 1024,
    "H200-SXM5-141GB": 1024,
    "L40S": 256,
    "L4": 256,
    "RTX-6000-ADA": 256,
    "RTX-4090": 128,  # GeForce: half-rate FP32 accumulate
    "RTX-5090": 128,  # GeForce: half-rate FP32 accumulate
    "MI100": 256,
    "MI210": 256,
    "MI250X": 256,
    "MI300X": 512,
    "MI325X": 512,
    "GAUDI2": 2 * 256 * 256,
    "GAUDI3": 2 * 256 * 256,
}

# stas00/ml-engineering MAMF table: measured best-shape bf16 TFLOP/s. peak x matmul_efficiency
# must reproduce them, whatever peak the entry uses.
MAMF_BF16_TFLOPS = {
    "A100-SXM4-80GB": 271.2,
    "A100-PCIE-80GB": 252.9,
    "H100-SXM5-80GB": 794.5,
    "H200-SXM5-141GB": 794.5,
    "B200": 1745.0,
    "MI300X": 668.4,
    "MI325X": 784.9,
    "GAUDI2": 418.7,
    "GAUDI3": 1243.0,
}


@pytest.fixture(scope="module")
def gpus():
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(CATALOG_ENV, raising=False)
        return load_catalog().gpus


def _all(gpus):
    return list(gpus)


def _close(a: float, b: float, rel: float) -> bool:
    return math.isclose(a, b, rel_tol=rel)


def test_every_design_id_is_present(gpus):
    missing = [i for i in DESIGN_IDS if i not in gpus.entries]
    assert not missing, missing


def test_every_entry_cites_a_source(gpus):
    for gpu in _all(gpus):
        assert gpu.sources and all(s.strip() for s in gpu.sources), gpu.id


def test_h100_sxm_peaks_are_dense():
    gpu = load_catalog().gpus.get("H100-SXM5-80GB").entry
    assert _close(gpu.peak("bf16"), 989.4, 0.01)  # not the 1979 sparsity figure
    assert _close(gpu.peak("fp8"), 1978.9, 0.01)
    assert _close(gpu.peak("tf32"), 494.7, 0.01)
    assert _close(gpu.peak("fp32"), 67, 0.01)


def test_precision_ordering(gpus):
    for gpu in _all(gpus):
        p = gpu.peak_tflops
        if p.fp8 is not None and p.bf16 is not None:
            assert p.fp8 >= p.bf16, gpu.id
        if p.fp4 is not None:
            assert p.fp8 is not None and p.fp4 >= p.fp8, gpu.id
        if p.tf32 is not None and p.bf16 is not None:
            assert p.tf32 <= p.bf16, gpu.id
        if p.fp32 is not None and p.bf16 is not None:
            assert p.fp32 <= p.bf16, gpu.id
        if p.fp64 is not None and p.fp32 is not None:
            # FP64 matrix units reach 2x the FP32 vector rate (Hopper, CDNA2/3), never more.
            assert p.fp64 <= 2.01 * p.fp32, gpu.id
        if p.int8 is not None and p.bf16 is not None:
            assert p.int8 >= p.bf16, gpu.id


def test_bf16_equals_fp16_on_gpus(gpus):
    # NVIDIA and AMD run bf16 at the fp16 rate, except CDNA1 (MI100) where bf16 is half.
    for gpu in _all(gpus):
        p = gpu.peak_tflops
        if gpu.vendor == "intel" or p.bf16 is None or p.fp16 is None:
            continue
        expected = p.fp16 / 2 if gpu.architecture == "CDNA" else p.fp16
        assert _close(p.bf16, expected, 0.02), gpu.id


def test_formats_the_chip_lacks_are_null(gpus):
    for gpu in _all(gpus):
        p = gpu.peak_tflops
        if gpu.architecture in ("Volta", "Turing"):
            assert p.bf16 is None and p.tf32 is None and p.fp8 is None, gpu.id
        if gpu.architecture in ("Volta", "Turing", "Ampere", "CDNA", "CDNA2"):
            assert p.fp8 is None, gpu.id
        assert p.bf16 is not None or gpu.architecture in ("Volta", "Turing"), gpu.id


@pytest.mark.parametrize("gpu_id", sorted(DENSE_FLOP_PER_CLK_PER_MATRIX_CORE))
def test_peak_matches_units_times_clock(gpus, gpu_id):
    gpu = gpus.get(gpu_id).entry
    half = max(v for v in (gpu.peak("fp16"), gpu.peak("bf16")) if v is not None)
    derived = (
        gpu.matrix_cores
        * gpu.boost_clock_mhz
        * 1e6
        * DENSE_FLOP_PER_CLK_PER_MATRIX_CORE[gpu_id]
        / 1e12
    )
    assert _close(half, derived, 0.03), (gpu_id, half, derived)


def test_plausible_ranges(gpus):
    for gpu in _all(gpus):
        assert 16 <= gpu.memory_gib <= 300, gpu.id
        assert 250 <= gpu.memory_bandwidth_gbs <= 10_000, gpu.id
        assert gpu.memory_bus_width_bits in (192, 256, 384, 512, 4096, 5120, 6144, 8192), gpu.id
        assert 50 <= gpu.tdp_w <= 1400, gpu.id  # GB300: 1.4 kW
        assert 1000 <= gpu.boost_clock_mhz <= 3000, gpu.id
        assert 2017 <= gpu.year <= 2026, gpu.id
        if gpu.memory_type.startswith("HBM"):
            assert gpu.memory_bus_width_bits >= 4096, gpu.id
        else:
            assert gpu.memory_bus_width_bits <= 512, gpu.id
        bf16 = gpu.peak("bf16") or gpu.peak("fp16")
        assert 50 <= bf16 <= 2600, gpu.id


def test_known_capacities_and_bandwidths(gpus):
    expected = {
        "A100-SXM4-80GB": (80, 2039),
        "H100-SXM5-80GB": (80, 3350),
        "H200-SXM5-141GB": (141, 4800),
        "MI300X": (192, 5300),
        "MI325X": (256, 6000),
        "MI250X": (64, 1638.4),  # one GCD, not the 128 GB package
        "GAUDI3": (128, 3700),
        "RTX-4090": (24, 1008),
    }
    for gpu_id, (gib, gbs) in expected.items():
        gpu = gpus.get(gpu_id).entry
        assert gpu.memory_gib == gib, gpu_id
        assert _close(gpu.memory_bandwidth_gbs, gbs, 0.01), gpu_id


def test_matmul_efficiency_reproduces_mamf_measurements(gpus):
    for gpu_id, measured in MAMF_BF16_TFLOPS.items():
        gpu = gpus.get(gpu_id).entry
        assert gpu.matmul_efficiency is not None, gpu_id
        assert _close(gpu.peak("bf16") * gpu.matmul_efficiency, measured, 0.02), gpu_id


def test_a_superchips_host_link_is_its_nvlink_c2c(gpus):
    """GB200 and GB300 reach their Grace CPU's memory over NVLink-C2C, not a PCIe slot: a job on them
    gets that link by default, and every other GPU keeps the PCIe link its generation and lanes name."""
    from trainrig import load_job

    links = load_catalog().links
    for gpu in _all(gpus):
        if gpu.host_link is not None:
            assert links.get(gpu.host_link).entry.kind == "nvlink", gpu.id
    assert {gpu.id for gpu in _all(gpus) if gpu.host_link} == {"GB200", "GB300"}
    training = {"seq_len": 2048, "global_batch": 8, "micro_batch": 1}
    superchip = load_job({"model": "llama3-8b", "hardware": {"gpu": "GB200", "n_gpus": 4, "gpus_per_node": 4},
                          "training": training})
    assert superchip.hardware.host_link.id == "nvlink-c2c-gb" and superchip.hardware.host_link.bandwidth_gbs == 225
    board = load_job({"model": "llama3-8b", "hardware": {"gpu": "B200", "n_gpus": 8}, "training": training})
    assert board.hardware.host_link.id == "pcie5-x16"


def test_scale_up_links(gpus):
    for gpu in _all(gpus):
        if gpu.scale_up is None:
            assert gpu.scale_up_gbs is None, gpu.id
        else:
            assert gpu.scale_up in SCALE_UP_IDS, (gpu.id, gpu.scale_up)
            assert gpu.scale_up_gbs is not None and 100 <= gpu.scale_up_gbs <= 1800, gpu.id
    for gpu_id in PCIE_ONLY:
        assert gpus.get(gpu_id).entry.scale_up is None, gpu_id
    assert gpus.get("H100-SXM5-80GB").entry.scale_up_gbs == 900
    assert gpus.get("A100-SXM4-80GB").entry.scale_up_gbs == 600
    assert gpus.get("V100-SXM2-32GB").entry.scale_up_gbs == 300
    assert gpus.get("B200").entry.scale_up_gbs == 1800


def test_form_factors(gpus):
    for gpu_id in ("MI250X", "MI300X", "MI325X", "GAUDI2", "GAUDI3"):
        assert gpus.get(gpu_id).entry.form_factor == "oam", gpu_id
    for gpu_id in ("H100-SXM5-80GB", "H200-SXM5-141GB", "A100-SXM4-80GB", "B200", "H20"):
        assert gpus.get(gpu_id).entry.form_factor in ("sxm", "hgx"), gpu_id


def test_aliases_are_unique_and_never_shadow_an_id(gpus):
    ids = {normalize_name(g.id): g.id for g in _all(gpus)}
    seen: dict[str, str] = {}
    for gpu in _all(gpus):
        for alias in gpu.aliases:
            key = normalize_name(alias)
            assert key not in seen, f"alias {alias!r} on {gpu.id} and {seen[key]}"
            assert ids.get(key, gpu.id) == gpu.id, f"alias {alias!r} on {gpu.id} is {ids[key]}'s id"
            seen[key] = gpu.id


@pytest.mark.parametrize(
    ("name", "gpu_id"),
    [
        ("h100", "H100-SXM5-80GB"),
        ("a100", "A100-SXM4-80GB"),
        ("v100", "V100-SXM2-32GB"),
        ("mi300x", "MI300X"),
        ("4090", "RTX-4090"),
        ("rtx4090", "RTX-4090"),
        ("a100-80gb", "A100-SXM4-80GB"),
        ("h200", "H200-SXM5-141GB"),
        ("gaudi2", "GAUDI2"),
        ("hl-225", "GAUDI2"),
        ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"),
        ("NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"),
        ("NVIDIA GeForce RTX 4090", "RTX-4090"),
        ("AMD Instinct MI300X", "MI300X"),
        ("Tesla T4", "T4"),
        ("h100_sxm5_80gb", "H100-SXM5-80GB"),
    ],
)
def test_names_resolve(gpus, name, gpu_id):
    assert gpus.get(name).entry.id == gpu_id


def test_family_name_notes_the_other_parts(gpus):
    resolved = gpus.get("h100")
    assert resolved.entry.id == "H100-SXM5-80GB"
    assert resolved.note is not None
    assert "H100-PCIE-80GB" in resolved.note and "H100-NVL-94GB" in resolved.note
    assert gpus.get("H100-SXM5-80GB").note is None


def test_unknown_name_suggests(gpus):
    with pytest.raises(TrainrigError) as caught:
        gpus.get("h1000")
    assert "did you mean" in str(caught.value)
