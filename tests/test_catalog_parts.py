"""The non-GPU hardware catalog: links, CPUs, host memory and storage.

These tests check the packaged data against physics and datasheets (encoding arithmetic, generation
ordering, cross-references), so a mistyped figure or a dangling id fails here.
"""

from __future__ import annotations

from itertools import pairwise

import pytest

from trainrig.catalog import Catalog, load_catalog
from trainrig.catalog.registry import CATALOG_ENV, normalize_name
from trainrig.errors import TrainrigError

PCIE_GENS = (3, 4, 5, 6)
PCIE_LANES = (16, 8, 4)
PCIE_IDS = [f"pcie{g}-x{n}" for g in PCIE_GENS for n in PCIE_LANES]
NVLINK_IDS = ["nvlink2", "nvlink3", "nvlink4", "nvlink5"]
SCALE_UP_IDS = [
    *NVLINK_IDS,
    "nvlink-bridge",
    "infinity-fabric-2",
    "infinity-fabric-3",
    "gaudi2-roce",
    "gaudi3-roce",
]
IB_RATES = {"ib-edr": 100, "ib-hdr": 200, "ib-ndr": 400, "ib-xdr": 800}
ETH_RATES = {"eth-10g": 10, "eth-25g": 25, "eth-100g": 100, "eth-200g": 200, "eth-400g": 400}
NETWORK_RATES = {**IB_RATES, **ETH_RATES}
LINK_IDS = [*PCIE_IDS, *SCALE_UP_IDS, *NETWORK_RATES]

CPU_IDS = [
    "xeon-8180",
    "xeon-8168",
    "xeon-8280",
    "xeon-8380",
    "xeon-8480",
    "xeon-8592",
    "xeon-6980p",
    "epyc-7742",
    "epyc-7763",
    "epyc-9654",
    "epyc-9755",
    "grace",
]
HOST_MEMORY_IDS = ["ddr4-2666", "ddr4-2933", "ddr4-3200", "ddr5-4800", "ddr5-5600", "ddr5-6400"]
STORAGE_IDS = ["hdd", "sata-ssd", "nvme-gen3", "nvme-gen4", "nvme-gen5", "nfs", "lustre"]

SECTIONS = ("links", "cpus", "host_memory", "storage")


@pytest.fixture
def catalog(monkeypatch) -> Catalog:
    """The packaged catalog only: a user's TRAINRIG_CATALOG must not change what is tested."""
    monkeypatch.delenv(CATALOG_ENV, raising=False)
    return load_catalog()


def _rel(a: float, b: float) -> float:
    return abs(a - b) / b


# --- every required entry exists and says where its figures come from -----------------------------


@pytest.mark.parametrize(
    ("section", "entry_id"),
    [("links", i) for i in LINK_IDS]
    + [("cpus", i) for i in CPU_IDS]
    + [("host_memory", i) for i in HOST_MEMORY_IDS]
    + [("storage", i) for i in STORAGE_IDS],
)
def test_required_entry_exists_with_sources(catalog, section, entry_id):
    resolved = getattr(catalog, section).get(entry_id)
    assert resolved.entry.id == entry_id
    assert resolved.note is None, "looking an entry up by its own id needs no note"
    assert resolved.entry.sources
    assert all(s.strip() for s in resolved.entry.sources)


def test_lpddr5x_entry_for_grace_exists(catalog):
    grace = catalog.cpus.get("grace").entry
    assert grace.memory.startswith("lpddr5x-")
    assert catalog.host_memory.get(grace.memory).entry.ddr_type == "LPDDR5X"


@pytest.mark.parametrize("section", SECTIONS)
def test_no_alias_is_shadowed(catalog, section):
    """The registry keeps a name's first owner; a second entry claiming it would be unreachable."""
    owners: dict[str, str] = {}
    entries = list(getattr(catalog, section))
    for entry in entries:
        owners[normalize_name(entry.id)] = entry.id
    for entry in entries:
        for alias in entry.aliases:
            key = normalize_name(alias)
            owner = owners.setdefault(key, entry.id)
            assert owner == entry.id, f"{section}: alias {alias!r} of {entry.id} is already {owner}"


# --- PCIe: encoding arithmetic --------------------------------------------------------------------


def test_pcie4_x16_is_31_5_gbs(catalog):
    assert catalog.links.get("pcie4-x16").entry.bandwidth_gbs == pytest.approx(31.5, rel=0.01)


@pytest.mark.parametrize("lanes", PCIE_LANES)
@pytest.mark.parametrize("gen", PCIE_GENS[1:])
def test_pcie_bandwidth_doubles_per_generation(catalog, gen, lanes):
    new = catalog.links.get(f"pcie{gen}-x{lanes}").entry.bandwidth_gbs
    old = catalog.links.get(f"pcie{gen - 1}-x{lanes}").entry.bandwidth_gbs
    assert new / old == pytest.approx(2.0, rel=0.05)


@pytest.mark.parametrize("lanes", PCIE_LANES[1:])
@pytest.mark.parametrize("gen", PCIE_GENS)
def test_pcie_bandwidth_halves_with_lanes(catalog, gen, lanes):
    narrow = catalog.links.get(f"pcie{gen}-x{lanes}").entry.bandwidth_gbs
    wide = catalog.links.get(f"pcie{gen}-x{lanes * 2}").entry.bandwidth_gbs
    assert wide / narrow == pytest.approx(2.0, rel=0.05)


@pytest.mark.parametrize("gen", PCIE_GENS)
def test_pcie_is_below_the_raw_signalling_rate(catalog, gen):
    """After encoding: 128b/130b up to Gen5 (98.5%), FLIT mode at Gen6 (~94.5%); never raw GT/s."""
    raw_per_lane = {3: 1.0, 4: 2.0, 5: 4.0, 6: 8.0}[gen]  # GB/s per lane, before encoding
    link = catalog.links.get(f"pcie{gen}-x16").entry
    assert 0.90 * 16 * raw_per_lane <= link.bandwidth_gbs < 16 * raw_per_lane


@pytest.mark.parametrize("link_id", PCIE_IDS)
def test_pcie_fields_match_the_id(catalog, link_id):
    link = catalog.links.get(link_id).entry
    gen, lanes = link_id.removeprefix("pcie").split("-x")
    assert link.kind == "pcie"
    assert (link.pcie_gen, link.lanes) == (int(gen), int(lanes))
    assert link.line_rate_gbps is None
    assert link.default_ports_per_node is None


def test_pcie_efficiency_matches_measured_copies(catalog):
    """MODELING.md: pinned x16 copies reach ~12 (Gen3), ~25 (Gen4), ~55 (Gen5) GB/s."""
    for gen, measured in {3: 12.0, 4: 25.0, 5: 55.0}.items():
        link = catalog.links.get(f"pcie{gen}-x16").entry
        assert link.bandwidth_gbs * link.efficiency == pytest.approx(measured, rel=0.05)


# --- scale-up fabrics -----------------------------------------------------------------------------


def test_nvlink_generations_strictly_increase(catalog):
    rates = [catalog.links.get(i).entry.bandwidth_gbs for i in NVLINK_IDS]
    assert all(a < b for a, b in pairwise(rates)), rates


def test_nvlink_per_direction_totals(catalog):
    """Top SXM part of each generation, per GPU per direction: V100, A100, H100, B200."""
    expected = {"nvlink2": 150, "nvlink3": 300, "nvlink4": 450, "nvlink5": 900}
    got = {i: catalog.links.get(i).entry.bandwidth_gbs for i in expected}
    assert got == pytest.approx(expected)


def test_nvlink_bridge_is_half_of_112_5(catalog):
    assert catalog.links.get("nvlink-bridge").entry.bandwidth_gbs == pytest.approx(112.5 / 2)


def test_mi300x_mesh_is_seven_links_of_64(catalog):
    link = catalog.links.get("infinity-fabric-3").entry
    assert link.bandwidth_gbs == pytest.approx(7 * 64)
    assert "7" in (link.notes or "") and "one link" in (link.notes or "")


@pytest.mark.parametrize(("link_id", "port_gbs"), [("gaudi2-roce", 12.5), ("gaudi3-roce", 25.0)])
def test_gaudi_scale_up_is_21_ports(catalog, link_id, port_gbs):
    assert catalog.links.get(link_id).entry.bandwidth_gbs == pytest.approx(21 * port_gbs)


@pytest.mark.parametrize("link_id", SCALE_UP_IDS)
def test_scale_up_links_have_no_network_fields(catalog, link_id):
    link = catalog.links.get(link_id).entry
    assert link.kind in ("nvlink", "infinity-fabric", "gaudi-roce")
    assert link.line_rate_gbps is None and link.pcie_gen is None and link.lanes is None
    assert link.default_ports_per_node is None


def test_scale_up_collectives_reach_78_to_95_percent_on_nvidia(catalog):
    for link_id in NVLINK_IDS:
        assert 0.75 <= catalog.links.get(link_id).entry.efficiency <= 0.90


# --- network ports --------------------------------------------------------------------------------


@pytest.mark.parametrize(("link_id", "rate"), NETWORK_RATES.items())
def test_network_port_bandwidth_is_line_rate_over_eight(catalog, link_id, rate):
    link = catalog.links.get(link_id).entry
    assert link.line_rate_gbps == rate
    # quoted Ethernet/InfiniBand rates are data rates (after 64b/66b), so GB/s = Gb/s / 8; allow up
    # to 10% for any encoding overhead an entry chooses to subtract, never more than the line rate
    assert 0.90 * rate / 8 <= link.bandwidth_gbs <= rate / 8 * 1.001


@pytest.mark.parametrize("link_id", NETWORK_RATES)
def test_network_kind(catalog, link_id):
    kind = catalog.links.get(link_id).entry.kind
    assert kind == ("infiniband" if link_id.startswith("ib-") else "ethernet")


@pytest.mark.parametrize(
    ("link_id", "ports"),
    [
        *((i, None) for i in IB_RATES),
        ("eth-200g", None),
        ("eth-400g", None),
        ("eth-10g", 1),
        ("eth-25g", 1),
        ("eth-100g", 1),
    ],
)
def test_default_ports_per_node(catalog, link_id, ports):
    assert catalog.links.get(link_id).entry.default_ports_per_node == ports


def test_latency_ordering(catalog):
    """NVLink hop < PCIe hop < RDMA network hop < TCP hop (NCCL tuning model, nccl-tests)."""
    ids = ("nvlink4", "pcie4-x16", "ib-ndr", "eth-10g")
    lat = {i: catalog.links.get(i).entry.latency_us for i in ids}
    assert lat["nvlink4"] < lat["pcie4-x16"] < lat["ib-ndr"] < lat["eth-10g"]
    assert 1 <= lat["nvlink4"] <= 10
    assert lat["eth-10g"] >= 10


def test_infiniband_reaches_over_90_percent_and_tcp_less(catalog):
    for link_id in ("ib-edr", "ib-hdr", "ib-ndr"):
        assert catalog.links.get(link_id).entry.efficiency >= 0.90
    tcp, rdma = (catalog.links.get(i).entry.efficiency for i in ("eth-25g", "ib-hdr"))
    assert tcp < rdma


# --- CPUs and host memory -------------------------------------------------------------------------


def test_every_cpu_memory_exists_in_host_memory(catalog):
    ids = {m.id for m in catalog.host_memory}
    for cpu in catalog.cpus:
        assert cpu.memory in ids, f"{cpu.id}: memory {cpu.memory!r} is not a host_memory id"


@pytest.mark.parametrize("memory_id", HOST_MEMORY_IDS)
def test_ddr_per_channel_is_rate_times_8_bytes(catalog, memory_id):
    memory = catalog.host_memory.get(memory_id).entry
    assert memory_id == f"{memory.ddr_type.lower()}-{memory.transfer_rate_mts}"
    assert memory.per_channel_gbs == pytest.approx(memory.transfer_rate_mts * 8 / 1000, rel=0.005)
    assert 0.6 <= memory.efficiency <= 0.95


def test_every_host_memory_channel_is_8_bytes_per_transfer(catalog):
    for memory in catalog.host_memory:
        peak = memory.transfer_rate_mts * 8 / 1000
        assert memory.per_channel_gbs == pytest.approx(peak, rel=0.005), memory.id


def test_grace_channels_times_per_channel_is_its_total(catalog):
    grace = catalog.cpus.get("grace").entry
    memory = catalog.host_memory.get(grace.memory).entry
    total = grace.memory_channels * memory.per_channel_gbs
    assert total == pytest.approx(512, rel=0.1)
    assert str(round(total)) in (memory.notes or ""), "the notes state Grace's total bandwidth"


@pytest.mark.parametrize("cpu_id", CPU_IDS)
def test_cpu_fields_are_consistent(catalog, cpu_id):
    cpu = catalog.cpus.get(cpu_id).entry
    assert cpu.threads in (cpu.cores, 2 * cpu.cores)
    assert cpu.boost_clock_ghz >= cpu.base_clock_ghz
    assert cpu.generation


def test_cpu_memory_generation_matches_year(catalog):
    """DDR4 parts predate 2022, DDR5/LPDDR5X parts do not."""
    for cpu in catalog.cpus:
        ddr = catalog.host_memory.get(cpu.memory).entry.ddr_type
        assert (ddr == "DDR4") == (cpu.year < 2022), cpu.id


@pytest.mark.parametrize(
    ("cpu_id", "cores", "channels", "pcie_gen"),
    [
        ("xeon-8480", 56, 8, 5),
        ("epyc-7742", 64, 8, 4),
        ("epyc-9654", 96, 12, 5),
        ("xeon-8168", 24, 6, 3),
        ("grace", 72, 8, 5),
    ],
)
def test_dgx_and_flagship_cpus(catalog, cpu_id, cores, channels, pcie_gen):
    cpu = catalog.cpus.get(cpu_id).entry
    assert (cpu.cores, cpu.memory_channels, cpu.pcie_gen) == (cores, channels, pcie_gen)


def test_cpu_generations_get_more_cores(catalog):
    intel = ["xeon-8180", "xeon-8380", "xeon-8480", "xeon-8592", "xeon-6980p"]
    amd = ["epyc-7742", "epyc-9654", "epyc-9755"]
    for chain in (intel, amd):
        cores = [catalog.cpus.get(i).entry.cores for i in chain]
        assert cores == sorted(cores) and len(set(cores)) == len(cores), chain


# --- storage --------------------------------------------------------------------------------------


def test_local_storage_gets_faster(catalog):
    chain = ["hdd", "sata-ssd", "nvme-gen3", "nvme-gen4", "nvme-gen5"]
    entries = [catalog.storage.get(i).entry for i in chain]
    for slow, fast in pairwise(entries):
        assert slow.seq_read_gbs < fast.seq_read_gbs, (slow.id, fast.id)
        assert slow.random_read_iops < fast.random_read_iops, (slow.id, fast.id)
        assert slow.latency_ms >= fast.latency_ms, (slow.id, fast.id)


@pytest.mark.parametrize(
    ("storage_id", "link_id"),
    [("nvme-gen3", "pcie3-x4"), ("nvme-gen4", "pcie4-x4"), ("nvme-gen5", "pcie5-x4")],
)
def test_nvme_drive_fits_its_x4_link(catalog, storage_id, link_id):
    drive = catalog.storage.get(storage_id).entry
    link = catalog.links.get(link_id).entry
    assert drive.kind == "nvme"
    assert link.bandwidth_gbs * 0.6 < drive.seq_read_gbs <= link.bandwidth_gbs


def test_sata_ssd_is_under_the_sata_limit(catalog):
    assert catalog.storage.get("sata-ssd").entry.seq_read_gbs <= 0.6


def test_network_storage_kinds(catalog):
    assert catalog.storage.get("nfs").entry.kind == "network"
    assert catalog.storage.get("lustre").entry.kind == "parallel-fs"
    nfs = catalog.storage.get("nfs").entry
    assert nfs.seq_read_gbs <= 25 / 8, "an NFS client on 10-25 GbE cannot read faster than its wire"


# --- names ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("section", "name", "entry_id"),
    [
        ("links", "gen3x16", "pcie3-x16"),
        ("links", "gen3-x16", "pcie3-x16"),
        ("links", "pcie-gen3-x16", "pcie3-x16"),
        ("links", "pcie3", "pcie3-x16"),
        ("links", "pcie-gen3", "pcie3-x16"),
        ("links", "PCIe Gen5 x8", "pcie5-x8"),
        ("links", "10gbe", "eth-10g"),
        ("links", "10g", "eth-10g"),
        ("links", "roce-100g", "eth-100g"),
        ("links", "NDR", "ib-ndr"),
        ("storage", "parallel-fs", "lustre"),
        ("storage", "gpfs", "lustre"),
        ("storage", "weka", "lustre"),
        ("storage", "lustre-fs", "lustre"),
        ("cpus", "Intel Xeon Platinum 8480+", "xeon-8480"),
        ("cpus", "Intel Xeon Platinum 8480C", "xeon-8480"),
        ("cpus", "AMD EPYC 9654", "epyc-9654"),
        ("cpus", "AMD EPYC 7742", "epyc-7742"),
    ],
)
def test_aliases_resolve(catalog, section, name, entry_id):
    resolved = getattr(catalog, section).get(name)
    assert resolved.entry.id == entry_id
    if normalize_name(name) != normalize_name(entry_id):
        assert resolved.note and entry_id in resolved.note


@pytest.mark.parametrize(
    ("section", "name", "suggestion"),
    [
        ("links", "pcie4-x32", "pcie4-x"),
        ("links", "nvlink6", "nvlink"),
        ("links", "ib-ndrr", "ib-ndr"),
        ("cpus", "epyc-9655", "epyc-9"),
        ("host_memory", "ddr5-4801", "ddr5-4800"),
        ("storage", "nvme-gen7", "nvme-gen"),
    ],
)
def test_unknown_name_suggests_close_ones(catalog, section, name, suggestion):
    with pytest.raises(TrainrigError) as info:
        getattr(catalog, section).get(name)
    message = str(info.value)
    assert "did you mean" in message
    assert suggestion in message
    assert name in message
