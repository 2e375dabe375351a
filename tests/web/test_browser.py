"""End to end: `trainrig serve` in its own process, driven by a real headless Chromium through Playwright
(the fixtures and helpers are in browser_support.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playwright.sync_api import expect

from trainrig.units import duration_text, money_text

from .browser_support import (
    LAPTOP,
    PHONE,
    REPO,
    cli,
    declare_huge_body,
    fits_the_screen,
    get,
    needs_chromium,
    open_page,
    post_json,
)

pytestmark = needs_chromium
PRICE_USD = 2.5


ESTIMATE_FLAGS = ["--model", "llama3-8b", "--gpu", "H100-SXM5-80GB", "--gpus", "8", "--gpus-per-node", "8",
                  "--tokens", "1e11", "--seq-len", "4096", "--global-batch", "256", "--micro-batch", "1",
                  "--precision", "bf16", "--method", "full", "--zero", "3", "--recompute", "selective",
                  "--set", "cpu_cores_per_node=112", "--set", "ram_gb_per_node=2048", "--set", "storage=nvme-gen4",
                  "--price", str(PRICE_USD), "--what-if", "recompute=full"]


def settle(page) -> None:
    """Wait until no estimate is waiting (debounced) or in flight: the page says so on <body>."""
    page.wait_for_selector("body[data-settled='1']", state="attached", timeout=60_000)


def open_parallelism(page) -> None:
    page.locator("details:has(#tp)").evaluate("(details) => { details.open = true; }")


def fill_fixed_job(page) -> None:
    page.select_option("#model-preset", "llama3-8b")
    page.fill("#tokens", "1e11")
    page.fill("#seq-len", "4096")
    page.select_option("#gpu", "H100-SXM5-80GB")
    page.fill("#n-gpus", "8")
    open_parallelism(page)
    page.select_option("#zero", "3")
    page.fill("#price", str(PRICE_USD))
    page.fill("#what-if", "recompute=full")


def test_the_page_estimates_what_the_cli_does_and_its_link_and_job_file_reproduce_it(server, browser, artifacts):
    page, problems = open_page(browser, server, LAPTOP)
    fill_fixed_job(page)
    page.click("#run")
    settle(page)
    expected = cli("estimate", *ESTIMATE_FLAGS)

    mfu = page.locator("[data-testid=mfu]")
    assert float(mfu.get_attribute("data-value")) == expected["mfu"]
    assert mfu.inner_text() == f"{expected['mfu'] * 100:.1f}%"
    assert page.inner_text("[data-testid=gpu-hours]") == f"{int(expected['gpu_hours'] + 0.5):,}"
    assert page.inner_text("[data-testid=cost]") == money_text(expected["cost_usd"])
    assert page.inner_text("[data-testid=total-time]") == duration_text(expected["total_time_s"])
    memory_parts = [v for v in expected["memory_breakdown_gib"].values() if v > 0]
    assert page.locator("[data-testid=memory-bar] svg > rect[class^=fill-c]").count() == len(memory_parts)
    assert page.locator("[data-testid=step-bar] svg rect").count() >= 1
    what_if_rows = page.locator("[data-testid=what-if-table] tbody tr")
    assert what_if_rows.count() == 2  # the base and recompute=full
    assert what_if_rows.nth(1).locator("svg.mini-memory").count() == 1  # a mini memory bar per row
    assert "cores" in page.inner_text("[data-testid=node-cpu]")
    page.screenshot(path=artifacts / "laptop-estimate.png", full_page=True)

    with page.expect_download() as download:
        page.click("#download")
    job_file = artifacts / "trainrig-job.json"
    download.value.save_as(job_file)
    from_file = cli("estimate", str(job_file), "--price", str(PRICE_USD), "--what-if", "recompute=full")
    assert from_file == expected

    phone, phone_problems = open_page(browser, page.url, PHONE)  # the link alone reproduces the view
    settle(phone)
    assert float(phone.locator("[data-testid=mfu]").get_attribute("data-value")) == expected["mfu"]
    assert fits_the_screen(phone)
    phone.screenshot(path=artifacts / "phone-estimate.png", full_page=True)
    assert problems == [] and phone_problems == []


def test_an_uploaded_config_json_is_estimated(server, browser):
    page, problems = open_page(browser, server, LAPTOP)
    page.click("#custom-model summary")
    page.set_input_files("#config-file", str(REPO / "tests" / "data" / "hf" / "Qwen2.5-7B.json"))
    expect(page.locator("#model-info")).to_contain_text("from your config.json")
    page.click("#run")
    settle(page)
    assert "7.62 B" in page.inner_text("[data-testid=model-info]")
    assert problems == []


def test_a_hugging_face_model_id_gives_the_address_of_its_config_and_fetches_nothing(server, browser):
    page, problems = open_page(browser, server, LAPTOP)
    requests = []
    page.on("request", lambda request: requests.append(request.url))
    page.click("#custom-model summary")
    page.fill("#hf-id", "Qwen/Qwen2.5-7B")
    link = page.locator("[data-testid=hf-config-link]")
    expect(link).to_have_attribute("href", "https://huggingface.co/Qwen/Qwen2.5-7B/blob/main/config.json")
    page.fill("#hf-id", "not an id")
    expect(page.locator("[data-testid=hf-id-help]")).to_contain_text("owner, a slash, the name")
    assert link.count() == 0
    assert all(url.startswith(server) for url in requests)  # the page asked nothing of any other origin
    assert problems == []


def test_the_real_server_answers_bad_input_with_4xx_and_keeps_serving(server):
    api = f"{server}/api/estimate"
    bad = [
        (json.dumps({"model": {"hf_config": "{not json"}, "hardware": {"gpu": "h100"}}).encode(), 422),
        (b'{"model": "llama3-8b", "hardware": {"gpu": "h100"', 422),  # malformed JSON
        (json.dumps({"model": "llama3-8b", "hardware": {"gpu": "b9000"}}).encode(), 422),
        (json.dumps({"model": "llama3-8b", "hardware": {"gpu": "h100", "n_gpus": 8}, "training": {"pp": 3}}).encode(),
         422),
    ]
    for body, status in bad:
        answer_status, answer = post_json(api, body)
        assert answer_status == status, answer
        assert answer["field"] and answer["message"]
    huge_status, huge = declare_huge_body(server)
    assert huge_status == 413 and huge["field"] == "body"
    good_status, good = post_json(api, json.dumps({"model": "llama3-8b", "hardware": {"gpu": "h100"}}).encode())
    assert good_status == 200 and "mfu" in good


SMALL_JOB = {"model": "gpt3-350m", "hardware": {"gpu": "RTX-4090", "n_gpus": 1},
             "training": {"seq_len": 2048, "global_batch": 64, "micro_batch": 1, "precision": "bf16", "method": "full",
                          "tokens": 1e9, "zero": 0, "recompute": "none"}}


def fill_small_job(page) -> None:
    page.select_option("#model-preset", SMALL_JOB["model"])
    page.select_option("#gpu", SMALL_JOB["hardware"]["gpu"])
    page.fill("#n-gpus", str(SMALL_JOB["hardware"]["n_gpus"]))
    page.fill("#seq-len", str(SMALL_JOB["training"]["seq_len"]))
    page.fill("#global-batch", str(SMALL_JOB["training"]["global_batch"]))
    page.fill("#tokens", "1e9")
    open_parallelism(page)  # the form starts from the README's 8 × H100 node: this job sets its own host
    page.fill("#gpus-per-node", "")
    page.fill("#cpu-cores", "")
    page.fill("#ram-gb", "")
    page.select_option("#storage", "")
    page.select_option("#zero", str(SMALL_JOB["training"]["zero"]))
    page.select_option("#recompute", SMALL_JOB["training"]["recompute"])


def test_the_what_fits_panel_shows_the_fit_api_answers_after_the_estimate(server, browser, artifacts):
    status, expected = post_json(f"{server}/api/fit", json.dumps(SMALL_JOB).encode())
    assert status == 200, expected
    page, problems = open_page(browser, server, LAPTOP)
    fill_small_job(page)
    page.click("#run")
    settle(page)
    largest = page.locator("[data-testid=fit-micro-batch]")
    largest.wait_for()
    micro_batch = expected["micro_batch"]
    assert micro_batch["value"] is not None
    assert int(largest.get_attribute("data-value")) == micro_batch["value"]
    assert largest.inner_text() == f"{micro_batch['value']:,}"
    panel = page.locator("[data-testid=fit-panel]")
    assert panel.get_by_role("heading", name="What fits").is_visible()
    assert page.inner_text("[data-testid=fit-micro-batch-memory]") == (
        f"{micro_batch['memory_per_gpu_gib']:.1f} of {micro_batch['memory_capacity_gib']:.1f} GiB per GPU")
    for note in micro_batch["notes"]:
        expect(panel).to_contain_text(note)
    assert int(page.get_attribute("[data-testid=fit-seq-len]", "data-value")) == expected["seq_len"]["value"]
    assert int(page.get_attribute("[data-testid=fit-n-gpus]", "data-value")) == expected["n_gpus_needed"]["value"]
    assert page.get_attribute("[data-testid=fit-cheapest]", "data-value") == expected["cheapest_gpu"]["gpu"]
    page.screenshot(path=artifacts / "laptop-fit.png", full_page=True)

    phone, phone_problems = open_page(browser, page.url, PHONE)
    settle(phone)
    phone.wait_for_selector("[data-testid=fit-micro-batch]")
    assert int(phone.get_attribute("[data-testid=fit-micro-batch]", "data-value")) == micro_batch["value"]
    assert fits_the_screen(phone)
    phone.screenshot(path=artifacts / "phone-fit.png", full_page=True)
    assert problems == [] and phone_problems == []


def test_the_what_fits_panel_waits_without_blocking_the_estimate_and_names_the_field_of_an_error(server, browser):
    page, _ = open_page(browser, server, LAPTOP)
    settle(page)
    held = []
    page.route("**/api/fit", lambda route: held.append(route))  # held back: the estimate renders first
    fill_small_job(page)
    page.click("#run")
    settle(page)
    status = page.locator("[data-testid=fit-status]")
    expect(status).to_contain_text("…")
    assert page.locator("[data-testid=fit-micro-batch]").count() == 0
    assert held  # one per estimate the edits started; only the latest one's answer is shown
    for route in held:
        route.fulfill(status=422, content_type="application/json",
                      body=json.dumps({"field": "training.seq_len", "message": "the sequence is too long"}))
    expect(status).to_contain_text("training.seq_len: the sequence is too long")
    assert page.locator("[data-testid=mfu]").is_visible()


FINETUNE = {"method": "qlora", "framework": "hf-trainer", "optimizer": "paged_adamw8bit", "loss": "chunked"}


def test_the_fine_tuning_controls_send_only_what_changed_and_round_trip_through_the_link(server, browser, artifacts):
    page, problems = open_page(browser, server, LAPTOP)
    fill_small_job(page)
    lora_rank = page.get_by_label("LoRA rank")
    page.click("summary:has-text('Fine-tuning')")
    assert not lora_rank.is_visible()  # adapters only for LoRA/QLoRA
    page.select_option("#method", FINETUNE["method"])
    assert lora_rank.is_visible() and page.get_by_label("Quantization of the base").is_visible()
    page.get_by_label("Framework").select_option(FINETUNE["framework"])
    page.get_by_label("Optimizer", exact=True).select_option(FINETUNE["optimizer"])
    page.get_by_label("Loss").select_option(FINETUNE["loss"])
    assert page.get_by_label("fp32 master weights").is_checked() and page.get_by_label("Pack samples").is_checked()
    settle(page)
    with page.expect_request("**/api/estimate") as request:
        page.click("#run")
    settle(page)

    sent = request.value.post_data_json
    job = {"model": SMALL_JOB["model"], "hardware": SMALL_JOB["hardware"],
           "training": {**SMALL_JOB["training"], **FINETUNE}}
    assert {key: sent[key] for key in ("model", "hardware", "training")} == job  # unchanged defaults stay unsent
    status, expected = post_json(f"{server}/api/estimate", json.dumps(job).encode())
    assert status == 200, expected
    assert float(page.get_attribute("[data-testid=memory]", "data-value")) == expected["memory_per_gpu_gib"]
    assert page.inner_text("[data-testid=memory]") == f"{expected['memory_per_gpu_gib']:.1f} GiB"

    with page.expect_download() as download:
        page.click("#download")
    job_file = artifacts / "trainrig-finetune-job.json"
    download.value.save_as(job_file)
    assert json.loads(job_file.read_text())["training"] == job["training"]
    page.screenshot(path=artifacts / "laptop-finetune.png", full_page=True)

    assert "fw=hf-trainer" in page.url and "mw=" not in page.url and "pack=" not in page.url
    again, again_problems = open_page(browser, page.url, LAPTOP)
    settle(again)
    for selector, value in (("#method", "qlora"), ("#framework", "hf-trainer"), ("#optimizer", "paged_adamw8bit"),
                            ("#loss", "chunked"), ("#offload", ""), ("#quantization", "")):
        assert again.input_value(selector) == value, selector
    assert again.is_checked("#master-weights") and again.is_checked("#packing")
    assert not again.is_checked("#train-embeddings") and not again.is_checked("#activation-offload")
    assert again.locator("#finetune").get_attribute("open") is not None  # set values are not folded away
    assert float(again.get_attribute("[data-testid=memory]", "data-value")) == expected["memory_per_gpu_gib"]
    assert problems == [] and again_problems == []


def test_an_error_naming_a_fine_tuning_field_marks_its_control(server, browser):
    page, _ = open_page(browser, server, LAPTOP)
    fill_small_job(page)
    page.select_option("#method", "lora")
    page.click("summary:has-text('Fine-tuning')")
    page.uncheck("#packing")
    page.fill("#mean-seq-len", "99999")  # longer than the sequence
    page.click("#run")
    settle(page)
    at_field = page.locator("#mean-seq-len-error")
    at_field.wait_for(state="visible")
    assert at_field.inner_text().startswith("Mean tokens per sample")  # the visible label, not the job field
    assert "training.mean_seq_len" not in at_field.inner_text()
    assert page.get_attribute("#mean-seq-len", "aria-invalid") is not None
    assert page.get_attribute("#lora-rank", "aria-invalid") is None
    assert "msl=99999" not in page.url  # a failed run leaves the link as it was


# ---- the first minute: a worked example, live estimates, fixes, compare, errors at the field, axe ---------

WIDE = {"width": 1440, "height": 900}
EXAMPLE = REPO / "examples" / "llama3-8b-8xh100.yaml"


def open_recording(browser, url: str, viewport: dict, path: str = "/api/estimate"):
    """A page whose requests to `path` are recorded from the first one on (the first load sends one)."""
    page = browser.new_page(viewport=viewport)
    problems: list[str] = []
    sent: list[dict] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.on("request", lambda request: sent.append(request.post_data_json) if request.url.endswith(path) else None)
    page.goto(url)
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)
    settle(page)
    return page, problems, sent


def page_matches(page, expected: dict) -> None:
    """The cards show the estimate `expected` (the API's or the CLI's JSON for the same job)."""
    assert float(page.get_attribute("[data-testid=mfu]", "data-value")) == expected["mfu"]
    assert float(page.get_attribute("[data-testid=memory]", "data-value")) == expected["memory_per_gpu_gib"]
    assert page.inner_text("[data-testid=total-time]") == duration_text(expected["total_time_s"])
    assert page.inner_text("[data-testid=cost]") == money_text(expected["cost_usd"])


def api_estimate(server, body: dict) -> dict:
    status, answer = post_json(f"{server}/api/estimate", json.dumps(body).encode())
    assert status == 200, answer
    return answer


def test_the_first_load_shows_the_readme_example_fitting_with_the_button_in_view(server, browser, artifacts, tmp_path):
    import yaml

    page, problems, sent = open_recording(browser, server, WIDE)
    assert len(sent) == 1  # estimated with no click
    example = yaml.safe_load(EXAMPLE.read_text())
    body = sent[0]
    assert body["model"] == example["model"]
    for section in ("hardware", "training"):
        shown = {key: value for key, value in example[section].items() if key != "flash_attention"}  # its default
        assert {key: body[section].get(key) for key in shown} == shown, section
    expected = cli("estimate", str(EXAMPLE), "--price", str(body["price_usd_per_gpu_hour"]))
    assert expected["fits"] is True
    expect(page.locator("[data-testid=fit-verdict]")).to_contain_text("Fits")
    page_matches(page, expected)
    assert page.inner_text("[data-testid=gpu-hours]") == f"{int(expected['gpu_hours'] + 0.5):,}"
    assert page.locator("[data-testid=capacity-label]").text_content() == (
        f"capacity {expected['memory_capacity_gib']:.1f} GiB")

    box = page.locator("#run").bounding_box()  # pinned to the bottom of the form: in view without scrolling
    assert box["y"] >= 0 and box["y"] + box["height"] <= WIDE["height"]
    assert page.evaluate("window.scrollY") == 0
    page.locator("[data-testid=fit-micro-batch]").wait_for()
    page.screenshot(path=artifacts / "first-load.png")

    phone, phone_problems, _ = open_recording(browser, server, PHONE)
    page_matches(phone, expected)
    assert fits_the_screen(phone)
    phone.screenshot(path=artifacts / "phone-first-load.png", full_page=True)
    assert problems == [] and phone_problems == []


def test_a_changed_field_is_estimated_live_without_a_click(server, browser, artifacts):
    page, problems, sent = open_recording(browser, server, WIDE)
    before = page.get_attribute("[data-testid=gpu-hours]", "data-value")
    page.fill("#n-gpus", "16")
    page.fill("#global-batch", "512")
    settle(page)
    assert len(sent) == 2  # the first load, then one for both edits (debounced)
    assert sent[-1]["hardware"]["n_gpus"] == 16 and sent[-1]["training"]["global_batch"] == 512
    page_matches(page, api_estimate(server, sent[-1]))
    assert page.get_attribute("[data-testid=gpu-hours]", "data-value") != before
    assert "n=16" in page.url
    page.screenshot(path=artifacts / "live-recompute.png")
    assert problems == []


def test_apply_on_a_suggested_fix_makes_a_job_that_does_not_fit_fit(server, browser, artifacts):
    page, problems, sent = open_recording(browser, server, WIDE)
    open_parallelism(page)
    page.select_option("#zero", "0")  # the old default: Llama 3 8B with unsharded AdamW states
    settle(page)
    not_fitting = api_estimate(server, sent[-1])
    assert not_fitting["fits"] is False
    expect(page.locator("[data-testid=fit-verdict]")).to_contain_text("Does not fit")
    for card in ("cost", "total-time"):
        label = page.locator(f".card:has([data-testid={card}]) .card-label")
        assert label.inner_text().endswith("if it fit")
        assert "if-fit" in page.locator(f".card:has([data-testid={card}])").get_attribute("class")
    assert page.locator("[data-testid=memory-bar] rect.overflow").count() == 1  # the part past the capacity
    page.locator("[data-testid=fit-micro-batch]").wait_for()
    fixes = page.locator("[data-testid=fix]")
    advice = not_fitting["fit_fixes"]
    assert advice and fixes.count() >= len(advice)
    for index, fix in enumerate(advice):  # the estimate's own fixes first, in its order
        assert fixes.nth(index).inner_text().startswith(fix["what_if"])
    page.screenshot(path=artifacts / "does-not-fit.png", full_page=True)

    first = fixes.first.inner_text()
    with page.expect_request("**/api/estimate") as request:
        page.click("[data-testid=apply-0]")
    settle(page)
    applied = request.value.post_data_json
    assert applied != sent[-2]
    fixed = api_estimate(server, applied)
    assert fixed["fits"] is True, first
    expect(page.locator("[data-testid=fit-verdict]")).to_contain_text("Fits")
    page_matches(page, fixed)
    assert page.locator("[data-testid=fix]").count() == 0
    page.screenshot(path=artifacts / "fix-applied.png")
    assert problems == []


COMPARE_GPUS = ["H100-SXM5-80GB", "A100-SXM4-80GB", "RTX-4090"]


def test_compare_mode_shows_one_row_per_gpu_type_as_the_cli_does(server, browser, artifacts):
    page, problems, sent = open_recording(browser, server, WIDE, path="/api/compare")
    page.check("input[name=mode][value=compare]")
    page.click("#gpu-types-box summary")
    for gpu in COMPARE_GPUS:
        page.check(f"#gpu-types input[value='{gpu}']")
    page.fill("#max-gpus", "64")
    page.click("#run")
    page.locator("[data-testid=compare-row]").first.wait_for()
    body = sent[-1]
    assert sorted(body["gpus"]) == sorted(COMPARE_GPUS) and body["max_gpus"] == 64
    expected = cli("compare", "--model", body["model"], "--tokens", str(body["tokens"]), "--seq-len",
                   str(body["seq_len"]), "--global-batch", str(body["global_batch"]), "--precision", body["precision"],
                   "--method", body["method"], "--objective", body["objective"], "--gpus", ",".join(body["gpus"]),
                   "--max-gpus", "64")
    rows = page.locator("[data-testid=compare-row]")
    assert rows.count() == len(expected["rows"])
    for index, row in enumerate(expected["rows"]):
        shown = rows.nth(index)
        assert shown.get_attribute("data-gpu") == row["gpu"]
        if row["plan"] is None:
            assert row["reason"] in shown.inner_text()
            continue
        est = row["plan"]["estimate"]
        assert shown.locator("[data-testid=compare-time] .compare-value").inner_text() == duration_text(
            est["total_time_s"])
        assert shown.locator("[data-testid=compare-cost] .compare-value").inner_text() == money_text(est["cost_usd"])
        assert float(shown.locator("[data-testid=compare-mfu]").get_attribute("data-value")) == est["mfu"]
        assert float(shown.locator("[data-testid=compare-headroom]").get_attribute("data-value")) == (
            row["plan"]["memory_headroom_gib"])
        offer = row["plan"]["offer"]
        if offer:
            assert offer["instance"] in shown.inner_text()

    page.click("th[data-sort=cost] button")
    priced = sorted((r for r in expected["rows"] if r["plan"] and r["plan"]["estimate"]["cost_usd"] is not None),
                    key=lambda r: r["plan"]["estimate"]["cost_usd"])
    order = rows.evaluate_all("(rows) => rows.map((row) => row.dataset.gpu)")
    assert order[:len(priced)] == [r["gpu"] for r in priced]
    assert page.get_attribute("th[data-sort=cost]", "aria-sort") == "ascending"
    page.screenshot(path=artifacts / "compare.png", full_page=True)

    phone, phone_problems = open_page(browser, page.url, PHONE)  # the link reopens the comparison
    phone.locator("[data-testid=compare-row]").first.wait_for()
    assert phone.locator("[data-testid=compare-row]").count() == len(expected["rows"])
    assert fits_the_screen(phone)
    phone.screenshot(path=artifacts / "phone-compare.png", full_page=True)
    assert problems == [] and phone_problems == []


def test_errors_are_shown_at_their_fields_in_words_of_the_label_and_focused(server, browser, artifacts):
    page, problems, sent = open_recording(browser, server, WIDE)
    page.fill("#tokens", "-5")
    page.fill("#seq-len", "")
    settle(page)
    assert len(sent) == 1  # checked in the browser: nothing sent
    errors = page.locator("[data-testid=field-error]")
    assert errors.count() == 2  # every error at once
    assert page.inner_text("#tokens-error").startswith("Tokens:")
    assert page.inner_text("#seq-len-error").startswith("Sequence length:")
    assert page.locator("[data-testid=stale-note]").is_visible()  # the result left is marked as the old one
    page.click("#run")
    assert page.evaluate("document.activeElement.id") == "tokens"

    page.fill("#tokens", "1.5e11")
    page.fill("#seq-len", "8192")
    page.fill("#n-gpus", "6")
    open_parallelism(page)
    page.fill("#tp", "4")  # tp does not divide 6 GPUs: the server says so
    page.click("#run")
    settle(page)
    status, answer = post_json(f"{server}/api/estimate", json.dumps({k: v for k, v in sent[-1].items()}).encode())
    assert status == 422 and answer["field"] == "training.tp"
    at_field = page.locator("#tp-error")
    assert at_field.is_visible()
    assert at_field.inner_text().startswith("Tensor parallel")
    assert "training.tp" not in at_field.inner_text() and "hardware.n_gpus" not in at_field.inner_text()
    assert page.evaluate("document.activeElement.id") == "tp"
    assert page.get_attribute("#tp", "aria-invalid") == "true"
    assert page.locator("[data-testid=stale-note]").is_visible()
    page.screenshot(path=artifacts / "field-error.png")
    assert [p for p in problems if "status of 422" not in p] == []  # the browser logs the 422 it was sent


def axe_violations(page) -> list[dict]:
    """axe-core's violations on the page, from the copy axe-playwright-python ships (nothing from a CDN)."""
    package = pytest.importorskip("axe_playwright_python")
    page.add_script_tag(path=str(Path(package.__file__).parent / "axe.min.js"))
    result = page.evaluate("axe.run(document)")
    return [{"id": v["id"], "nodes": [n["target"] for n in v["nodes"]]} for v in result["violations"]]


def test_the_estimate_view_has_no_axe_violations_on_a_laptop_or_a_phone(server, browser, artifacts):
    for name, viewport in (("laptop", WIDE), ("phone", PHONE)):
        # axe is added as a script tag, which the page's CSP (rightly) refuses: this page alone bypasses it
        page = browser.new_page(viewport=viewport, bypass_csp=True)
        page.goto(server)
        page.wait_for_selector("body[data-ready='1']", timeout=30_000)
        settle(page)
        page.locator("[data-testid=fit-micro-batch]").wait_for()
        assert axe_violations(page) == [], name
        if name == "laptop":  # and with the fixes, their Apply buttons and the dimmed cards
            open_parallelism(page)
            page.select_option("#zero", "0")
            settle(page)
            page.locator("[data-testid=fix]").first.wait_for()
            assert page.evaluate("axe.run(document)")["violations"] == [], "does not fit"
        page.close()


def test_the_gpu_picker_groups_by_vendor_and_finds_a_gpu_by_alias(server, browser):
    gpus = json.loads(get(f"{server}/api/gpus")[1])
    offers = json.loads(get(f"{server}/api/catalog")[1])["offers"]
    page, problems, sent = open_recording(browser, server, WIDE)
    groups = page.locator("#gpu optgroup")
    assert groups.count() == len({gpu["vendor"] for gpu in gpus})
    assert page.locator("#gpu option").count() == len(gpus)
    target = next(gpu for gpu in gpus if gpu["aliases"] and gpu["id"] != "H100-SXM5-80GB"
                  and any(offer["gpu"] == gpu["id"] and offer["usd_per_gpu_hour"] for offer in offers))
    cheapest = min((o for o in offers if o["gpu"] == target["id"] and o["usd_per_gpu_hour"]),
                   key=lambda o: o["usd_per_gpu_hour"])
    label = page.locator(f"#gpu option[value='{target['id']}']").inner_text()
    assert f"{target['memory_gib']:g} GiB" in label and f"from ${cheapest['usd_per_gpu_hour']:.2f}/h" in label
    page.fill("#gpu-search", target["aliases"][0].upper())  # type-ahead over aliases, any case
    settle(page)
    assert page.input_value("#gpu") == target["id"]
    assert sent[-1]["hardware"]["gpu"] == target["id"]  # and estimated live
    source = page.inner_text("[data-testid=price-source]")
    assert cheapest["instance"] in source and (cheapest["price_date"] or "") in source
    assert problems == []


def test_extreme_results_are_readable_and_flagged_and_one_what_if_line_combines_changes(server, browser, artifacts):
    page, problems, sent = open_recording(browser, server, WIDE)
    page.fill("#tokens", "1e18")
    settle(page)
    answer = api_estimate(server, sent[-1])
    assert page.inner_text("[data-testid=total-time]") == duration_text(answer["total_time_s"])
    assert page.inner_text("[data-testid=cost]") == money_text(answer["cost_usd"])
    # GPU-hours follow money_text's rule for large amounts: "33.1 billion", not 11 digits
    assert page.inner_text("[data-testid=gpu-hours]") == money_text(answer["gpu_hours"]).removeprefix("$")
    century = answer["total_time_s"] >= 100 * 365.25 * 86400
    assert page.locator("[data-testid=total-time-warning]").count() == (1 if century else 0)
    page.screenshot(path=artifacts / "extreme.png")

    page.fill("#what-if", "zero=3, recompute=full\nzero=3")
    settle(page)
    assert sent[-1]["what_if"] == ["zero=3, recompute=full", "zero=3"]  # one variant with both changes, then one
    assert page.locator("[data-testid=what-if-table] tbody tr").count() == 3  # the base and the two variants
    page.fill("#what-if", "recompute")
    settle(page)
    assert "not key=value" in page.inner_text("#what-if-error")
    assert problems == []
