"""The JSON API in-process: each answer equals the CLI's --json for the same input, and every bad input is
a 4xx that names its field, after which the app keeps answering."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from trainrig.web.app import STATIC_DIR, create_app
from trainrig.web.settings import Settings

from .conftest import SMALL_SEARCH, SMALL_SEARCH_FLAGS, cli_json

HF_DIR = Path(__file__).parents[1] / "data" / "hf"
JOB = {"model": "llama3-8b", "hardware": {"gpu": "h100", "n_gpus": 16, "gpus_per_node": 8, "inter_node": "ib-ndr"},
       "training": {"seq_len": 4096, "global_batch": 512, "micro_batch": 2, "zero": 3, "tokens": 2e11}}


def test_catalog_listings_equal_the_cli(client):
    assert client.get("/api/gpus").json() == cli_json("gpus")
    assert client.get("/api/models").json() == cli_json("models")


def test_estimate_equals_the_cli_for_the_same_job_what_ifs_and_price(client, tmp_path):
    job_file = tmp_path / "job.json"
    job_file.write_text(json.dumps(JOB))
    body = {**JOB, "what_if": ["inter_node=eth-25g", "recompute=full"], "price_usd_per_gpu_hour": 2.4}
    answer = client.post("/api/estimate", json=body)
    assert answer.status_code == 200, answer.text
    expected = cli_json("estimate", str(job_file), "--what-if", "inter_node=eth-25g", "--what-if", "recompute=full",
                        "--price", "2.4")
    assert answer.json() == expected
    assert [v["change"] for v in answer.json()["what_if"]] == ["inter_node=eth-25g", "recompute=full"]
    assert answer.json()["cost_usd"] == pytest.approx(answer.json()["gpu_hours"] * 2.4)


def test_an_uploaded_config_json_estimates_as_the_cli_reading_the_file(client, tmp_path):
    config = HF_DIR / "Phi-3-mini-4k-instruct.json"  # has _name_or_path, so both name the model alike
    body = {"model": {"hf_config": json.loads(config.read_text())}, "hardware": {"gpu": "A100-SXM4-80GB"},
            "training": {"seq_len": 2048, "global_batch": 64, "zero": 2}}
    answer = client.post("/api/estimate", json=body)
    assert answer.status_code == 200, answer.text
    expected = cli_json("estimate", "--model", str(config), "--gpu", "A100-SXM4-80GB", "--gpus", "1",
                        "--seq-len", "2048", "--global-batch", "64", "--zero", "2")
    assert answer.json() == expected


def test_the_model_route_turns_an_upload_into_the_job_files_model_mapping(client, tmp_path):
    config = json.loads((HF_DIR / "Meta-Llama-3-8B.json").read_text())
    answer = client.post("/api/model", json={"model": {"hf_config": config}}).json()
    preset = next(m for m in cli_json("models") if m["id"] == "llama3-8b")
    assert answer["n_params"] == preset["n_params"]  # the published 8.03 B, counted from the config's shape
    job_file = tmp_path / "job.json"  # the mapping the page puts in the job file is one the CLI reads
    job_file.write_text(json.dumps({"model": answer["model"], "hardware": {"gpu": "H100-SXM5-80GB"}}))
    assert cli_json("estimate", str(job_file))["config"]["n_params"] == preset["n_params"]


def test_node_sizing_is_the_planners_for_a_fitting_job_and_absent_otherwise(client):
    sized = client.post("/api/node", json=JOB).json()
    assert sized["message"] is None
    assert set(sized["node"]["reasons"]) == {"cpu", "ram", "storage", "network"}
    assert sized["node"]["network"] is not None  # 16 GPUs on 8 per node: two nodes need a network
    too_big = {**JOB, "training": {**JOB["training"], "zero": 0}, "hardware": {"gpu": "L4", "n_gpus": 1}}
    unsized = client.post("/api/node", json=too_big).json()
    assert unsized["node"] is None and "needs" in unsized["message"]


def _without_time(data: dict) -> dict:
    return {k: v for k, v in data.items() if k != "search_time_s"}


def test_plan_equals_the_cli_apart_from_the_measured_search_time(client):
    answer = client.post("/api/plan", json={**SMALL_SEARCH, "deadline_days": 2, "top": 3})
    assert answer.status_code == 200, answer.text
    expected = cli_json("plan", *SMALL_SEARCH_FLAGS, "--deadline-days", "2", "--top", "3")
    assert _without_time(answer.json()) == _without_time(expected)
    # at most --top rows: one per layout and node kind (the same layout at more GPUs is one row)
    assert answer.json()["search_time_s"] > 0 and 1 <= len(answer.json()["plans"]) <= 3


def test_compare_equals_the_cli_apart_from_the_measured_search_time(client):
    body = {**SMALL_SEARCH, "gpus": ["H100-SXM5-80GB", "A100-SXM4-80GB"], "objective": "time"}
    answer = client.post("/api/compare", json=body)
    assert answer.status_code == 200, answer.text
    flags = ["--model", "gpt3-125m", "--tokens", "1e9", "--gpus", "H100-SXM5-80GB,A100-SXM4-80GB",
             "--max-gpus", "8", "--objective", "time"]
    assert _without_time(answer.json()) == _without_time(cli_json("compare", *flags))


BAD_ESTIMATES = [
    ("unknown GPU", {"model": "llama3-8b", "hardware": {"gpu": "h1000"}}, "hardware.gpu", "did you mean"),
    ("impossible parallelism", {"model": "llama3-8b", "hardware": {"gpu": "h100", "n_gpus": 8},
                                "training": {"tp": 3}}, "training.tp", "does not divide"),
    ("tp not dividing heads", {"model": "llama3-8b", "hardware": {"gpu": "h100", "n_gpus": 6},
                               "training": {"tp": 6}}, "training.tp", "heads"),
    ("unknown model", {"model": "llama9-8b", "hardware": {"gpu": "h100"}}, "model", "unknown model"),
    ("encoder config.json", {"model": {"hf_config": json.loads((HF_DIR / "bert-base-uncased.json").read_text())},
                             "hardware": {"gpu": "h100"}}, "model", "encoder-only"),
    ("config.json not an object", {"model": {"hf_config": [1, 2]}, "hardware": {"gpu": "h100"}}, "model", "array"),
    ("config.json without shape", {"model": {"hf_config": {"model_type": "llama"}}, "hardware": {"gpu": "h100"}},
     "model", "layer count"),
    ("a server path as model", {"model": "/etc/hostname", "hardware": {"gpu": "h100"}}, "model", "reads no files"),
    ("a missing server path as model", {"model": "/no/such/file", "hardware": {"gpu": "h100"}}, "model",
     "reads no files"),
    ("a .json name as model", {"model": "config.json", "hardware": {"gpu": "h100"}}, "model", "reads no files"),
    ("a server path as profile", {"model": "llama3-8b", "hardware": {"gpu": "h100", "profile": "/etc/hostname"}},
     "hardware.profile", "reads no files"),
    ("a path through a what-if", {"model": "llama3-8b", "hardware": {"gpu": "h100"}, "what_if": ["model=/etc"]},
     "what_if", "reads no files"),
    ("a what-if that is no change", {"model": "llama3-8b", "hardware": {"gpu": "h100"}, "what_if": ["zero"]},
     "what_if", "key=value"),
    ("too many what-ifs", {"model": "llama3-8b", "hardware": {"gpu": "h100"}, "what_if": ["zero=1"] * 9},
     "what_if", "at most 8"),
    ("a GPU override of the wrong type", {"model": "llama3-8b",
                                          "hardware": {"gpu": {"base": "h100", "tdp_w": "lots"}}},
     "hardware.gpu.tdp_w", "number"),
    ("hardware not a mapping", {"model": "llama3-8b", "hardware": "h100"}, "hardware", "dictionary"),
    ("no hardware", {"model": "llama3-8b"}, "hardware", "required"),
    ("an unknown top-level key", {"model": "llama3-8b", "hardware": {"gpu": "h100"}, "gpu": "h100"},
     "gpu", "not a known field"),
    ("a zero price", {"model": "llama3-8b", "hardware": {"gpu": "h100"}, "price_usd_per_gpu_hour": 0},
     "price_usd_per_gpu_hour", "greater than 0"),
]


@pytest.mark.parametrize(("case", "body", "field", "words"), BAD_ESTIMATES, ids=[c[0] for c in BAD_ESTIMATES])
def test_a_bad_estimate_is_a_422_naming_the_field(client, case, body, field, words):
    answer = client.post("/api/estimate", json=body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["field"] == field
    assert words in answer.json()["message"]
    assert client.get("/api/gpus").status_code == 200  # and the app keeps serving


BAD_SEARCHES = [
    ("negative tokens", {**SMALL_SEARCH, "tokens": -1}, "tokens", "positive"),
    ("unknown GPU type", {**SMALL_SEARCH, "gpus": ["h1000"]}, "gpus", "h1000"),
    ("unknown objective", {**SMALL_SEARCH, "objective": "fun"}, "objective", "cost"),
    ("backwards batch range", {**SMALL_SEARCH, "global_batch": "2048-512"}, "global_batch", "backwards"),
    ("tokens as text", {**SMALL_SEARCH, "tokens": "lots"}, "tokens", "number"),
    ("too many GPUs", {**SMALL_SEARCH, "max_gpus": 10**9}, "max_gpus", "less than or equal"),
]


@pytest.mark.parametrize(("case", "body", "field", "words"), BAD_SEARCHES, ids=[c[0] for c in BAD_SEARCHES])
def test_a_bad_plan_is_a_422_naming_the_field(client, case, body, field, words):
    answer = client.post("/api/plan", json=body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["field"] == field
    assert words in answer.json()["message"]


@pytest.mark.parametrize("body", [b"{not json", b"\xff\xfe\x00", b"[1, 2]", b""])
def test_a_body_that_is_not_a_json_object_is_a_422_on_the_body(client, body):
    answer = client.post("/api/estimate", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 422, answer.text
    assert answer.json()["field"] == "body"


def test_bodies_over_the_cap_are_refused_whether_declared_or_streamed():
    limited = TestClient(create_app(Settings(max_body_bytes=10_000)))
    big = json.dumps({"model": {"hf_config": {"pad": "x" * 20_000}}, "hardware": {"gpu": "h100"}})
    declared = limited.post("/api/estimate", content=big, headers={"content-type": "application/json"})
    assert declared.status_code == 413 and declared.json()["field"] == "body"
    assert "10,000 bytes" in declared.json()["message"]
    chunks = (big[i:i + 1000].encode() for i in range(0, len(big), 1000))  # no Content-Length: counted
    streamed = limited.post("/api/estimate", content=chunks, headers={"content-type": "application/json"})
    assert streamed.status_code == 413
    assert limited.post("/api/estimate", json=JOB).status_code == 200


@pytest.mark.parametrize("path", ["/etc/hostname", "/etc/shadow", "/no/such/dir/config.json", "~/.bashrc",
                                  "~/no-such-file", "../../etc/passwd", "C:\\Windows\\win.ini"])
def test_a_model_given_as_a_path_is_refused_alike_whether_it_exists_or_not(client, path):
    answer = client.post("/api/model", json={"model": path})
    assert answer.status_code == 422, answer.text
    assert answer.json()["field"] == "model"
    assert answer.json()["message"].replace(path, "PATH") == (
        "model: 'PATH' is not a preset name, and the web API reads no files on the server: give a preset name "
        "(GET /api/models), a mapping of model fields, or {\"hf_config\": <the content of a config.json>}.")


def test_a_preset_name_never_reads_a_file_of_that_name_in_the_servers_directory(tmp_path, monkeypatch):
    (tmp_path / "llama3-8b").write_text("not a config.json")  # the loaders try a name as a path first
    monkeypatch.chdir(tmp_path)
    app = create_app()  # its workers start here, in the server's directory
    try:
        answer = TestClient(app).post("/api/estimate", json={"model": "llama3-8b", "hardware": {"gpu": "h100"}})
        assert answer.status_code == 200, answer.text
    finally:
        app.state.plan_worker.close()
        app.state.request_pool.close()


def test_a_model_name_is_looked_up_in_the_catalog_never_in_the_servers_directory(tmp_path, monkeypatch):
    from trainrig.web.inputs import model_source

    config = (HF_DIR / "Meta-Llama-3-8B.json").read_text()
    (tmp_path / "my-model").write_text(config)  # a file in the server's directory, named like a preset
    monkeypatch.chdir(tmp_path)
    with pytest.raises(Exception, match="unknown model 'my-model'"):
        model_source("my-model")
    assert model_source("meta-llama/Meta-Llama-3-8B") == "meta-llama/Meta-Llama-3-8B"  # an alias with a slash


def test_errors_outside_the_api_are_json_too(client):
    missing = client.get("/api/nothing")
    assert missing.status_code == 404 and missing.json()["message"] == "Not Found"
    wrong_method = client.get("/api/estimate")
    assert wrong_method.status_code == 405


def test_the_schema_lists_every_route(client):
    paths = client.get("/openapi.json").json()["paths"]
    for route in ("/api/gpus", "/api/models", "/api/estimate", "/api/plan", "/api/compare"):
        assert route in paths


def test_the_page_and_its_assets_come_from_this_server_only(client):
    page = client.get("/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert "default-src 'self'" in page.headers["content-security-policy"]
    for asset in STATIC_DIR.iterdir():
        served = client.get(f"/static/{asset.name}")
        assert served.status_code == 200, asset.name
        text = served.text.replace("http://www.w3.org/2000/svg", "")  # the SVG namespace is a name, not a fetch
        # the Hub address the model-id box writes is the href of a link the person opens, not a fetch
        text = text.replace("`https://huggingface.co/${id}/blob/main/config.json`", "")
        assert "http://" not in text and "https://" not in text and "//cdn" not in text, asset.name


def test_a_loopback_server_refuses_other_host_names():
    guarded = TestClient(create_app(allowed_hosts=("127.0.0.1", "localhost")), base_url="http://127.0.0.1")
    assert guarded.get("/api/gpus").status_code == 200
    assert guarded.get("/api/gpus", headers={"host": "attacker.example"}).status_code == 400


def test_serve_without_fastapi_exits_2_naming_the_extra(monkeypatch):
    from typer.testing import CliRunner

    from trainrig.cli.commands import serve
    from trainrig.cli.main import app

    real = serve.importlib.util.find_spec
    monkeypatch.setattr(serve.importlib.util, "find_spec", lambda name: None if name == "fastapi" else real(name))
    result = CliRunner().invoke(app, ["serve"])
    assert result.exit_code == 2
    assert "pip install 'trainrig[web]'" in result.output


def test_importing_trainrig_does_not_import_fastapi():
    import subprocess
    import sys

    code = "import sys, trainrig, trainrig.cli.main; print(sorted({'fastapi', 'uvicorn'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_serve_rejects_a_bad_port_with_exit_2():
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "trainrig", "serve", "--port", "70000"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2
    assert "port" in result.stderr


def test_fit_equals_the_cli_for_the_same_job(client, tmp_path):
    job_file = tmp_path / "job.json"
    job_file.write_text(json.dumps(JOB))
    answer = client.post("/api/fit", json=JOB)
    assert answer.status_code == 200, answer.text
    assert answer.json() == cli_json("fit", str(job_file))
    assert answer.json()["micro_batch"]["value"] >= JOB["training"]["micro_batch"]
    bad = client.post("/api/fit", json={**JOB, "training": {**JOB["training"], "loss": "sideways"}})
    assert bad.status_code in (400, 422) and "training.loss" in bad.text
