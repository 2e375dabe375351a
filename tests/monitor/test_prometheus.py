"""The Prometheus endpoint: scraped over HTTP, parsed as the text exposition format, DCGM names."""

from __future__ import annotations

import re
import socket
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

import trainrig
from trainrig.errors import TrainrigError
from trainrig.monitor.exporter import PrometheusExporter, Snapshot

from .conftest import answer, fake

# One sample line of the text format: name, optional {label="value",...}, a float value.
SAMPLE_LINE = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*",?)*\})? '
                         r'[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$|^[a-zA-Z_:][a-zA-Z0-9_:]*.* (NaN|[+-]Inf)$')


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        return response.read().decode()


def families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def wait_for_samples(m) -> None:
    deadline = time.monotonic() + 10
    while not m.sampler.latest_gpu or m.sampler.latest_gpu[0]["sm_active_pct"] is None:
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_scrape_parses_and_uses_dcgm_names_units_and_labels():
    with trainrig.monitor(hz=10, prometheus_port=0, nvml_backend=fake("h100_sxm_healthy")) as m:
        wait_for_samples(m)
        for _ in m.data(range(3)):
            m.step(tokens=10)
        text = scrape(m._exporter.port)
    for line in text.splitlines():
        assert line.startswith("# HELP ") or line.startswith("# TYPE ") or SAMPLE_LINE.match(line), line
    parsed = families(text)
    util = parsed["DCGM_FI_DEV_GPU_UTIL"]
    assert util.type == "gauge" and len(util.samples) == 2
    labels = util.samples[0].labels
    assert {"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname"} <= labels.keys()
    assert labels["modelName"] == answer("h100_sxm_healthy", 0, "nvmlDeviceGetName")
    memory = answer("h100_sxm_healthy", 0, "nvmlDeviceGetMemoryInfo")
    used = {s.labels["gpu"]: s.value for s in parsed["DCGM_FI_DEV_FB_USED"].samples}
    assert used["0"] == pytest.approx(memory["used"] / 2**20)
    active = {s.labels["gpu"]: s.value for s in parsed["DCGM_FI_PROF_SM_ACTIVE"].samples}
    assert active["0"] == pytest.approx(answer("h100_sxm_healthy", 0, "nvmlGpmMetricsGet")["2"] / 100)
    assert parsed["trainrig_host_memory_used_bytes"].samples[0].value > 0
    assert parsed["trainrig_step_count"].samples[0].value == 3


def test_unsupported_metrics_are_absent_not_minus_one():
    with trainrig.monitor(hz=10, prometheus_port=0, nvml_backend=fake("rtx2080_not_supported")) as m:
        deadline = time.monotonic() + 10
        while not m.sampler.latest_gpu:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        parsed = families(scrape(m._exporter.port))
    assert parsed["DCGM_FI_PROF_SM_ACTIVE"].samples == []
    assert parsed["DCGM_FI_DEV_GPU_UTIL"].samples[0].value == 0
    assert all(s.value >= 0 for f in parsed.values() for s in f.samples)


def test_a_port_in_use_is_one_sentence_error():
    with socket.socket() as busy:
        busy.bind(("0.0.0.0", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(TrainrigError) as error:
            PrometheusExporter(lambda: Snapshot(), port).start()
    assert error.value.field == "--prometheus" and str(port) in str(error.value)


def test_the_exporter_listens_on_loopback_unless_widened_on_purpose():
    exporter = PrometheusExporter(lambda: Snapshot(), 0).start()
    try:
        assert exporter._server.server_address[0] == "127.0.0.1"
        assert "DCGM_FI_DEV_GPU_UTIL" in scrape(exporter.port)
    finally:
        exporter.stop()
    wide = PrometheusExporter(lambda: Snapshot(), 0, "0.0.0.0").start()
    try:
        assert wide._server.server_address[0] == "0.0.0.0"
    finally:
        wide.stop()


def test_the_monitor_command_serves_metrics_on_loopback_before_the_job_starts(store):
    from trainrig.monitor.recording import RecordingConfig
    from trainrig.monitor.supervise import Supervisor

    supervisor = Supervisor(store, RecordingConfig(hz=10), prometheus_port=0, refresh_s=0.05)
    seen = []
    supervisor.run(["true"], on_refresh=lambda state: seen.append(
        supervisor.exporter._server.server_address[0]))
    assert set(seen) <= {"127.0.0.1"} and supervisor.exporter is None  # stopped at the end
