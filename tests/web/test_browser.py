"""End to end: `trainrig serve` in its own process, driven by a real headless Chromium through Playwright
(the fixtures and helpers are in browser_support.py)."""

from __future__ import annotations

import json

from playwright.sync_api import expect

from .browser_support import (
    LAPTOP,
    PHONE,
    REPO,
    cli,
    declare_huge_body,
    fits_the_screen,
    needs_chromium,
    open_page,
    post_json,
)

pytestmark = needs_chromium
PRICE_USD = 2.5


ESTIMATE_FLAGS = ["--model", "llama3-8b", "--gpu", "H100-SXM5-80GB", "--gpus", "8", "--tokens", "1e11",
                  "--seq-len", "4096", "--global-batch", "256", "--micro-batch", "1", "--precision", "bf16",
                  "--method", "full", "--zero", "3", "--price", str(PRICE_USD), "--what-if", "recompute=full"]


def fill_fixed_job(page) -> None:
    page.select_option("#model-preset", "llama3-8b")
    page.fill("#tokens", "1e11")
    page.select_option("#gpu", "H100-SXM5-80GB")
    page.fill("#n-gpus", "8")
    page.click("summary:has-text('Parallelism')")
    page.select_option("#zero", "3")
    page.fill("#price", str(PRICE_USD))
    page.fill("#what-if", "recompute=full")


def test_the_page_estimates_what_the_cli_does_and_its_link_and_job_file_reproduce_it(server, browser, artifacts):
    page, problems = open_page(browser, server, LAPTOP)
    fill_fixed_job(page)
    page.click("#run")
    page.wait_for_selector("[data-testid=mfu]")
    expected = cli("estimate", *ESTIMATE_FLAGS)

    mfu = page.locator("[data-testid=mfu]")
    assert float(mfu.get_attribute("data-value")) == expected["mfu"]
    assert mfu.inner_text() == f"{expected['mfu'] * 100:.1f}%"
    assert page.inner_text("[data-testid=gpu-hours]") == f"{int(expected['gpu_hours'] + 0.5):,}"
    assert page.inner_text("[data-testid=cost]") == f"${int(expected['cost_usd'] + 0.5):,}"
    memory_parts = [v for v in expected["memory_breakdown_gib"].values() if v > 0]
    assert page.locator("[data-testid=memory-bar] svg rect").count() == len(memory_parts)
    assert page.locator("[data-testid=step-bar] svg rect").count() >= 1
    assert page.locator("[data-testid=what-if-table] tbody tr").count() == 2  # the base and recompute=full
    assert "cores" in page.inner_text("[data-testid=node-cpu]")
    page.screenshot(path=artifacts / "laptop-estimate.png", full_page=True)

    with page.expect_download() as download:
        page.click("#download")
    job_file = artifacts / "trainrig-job.json"
    download.value.save_as(job_file)
    from_file = cli("estimate", str(job_file), "--price", str(PRICE_USD), "--what-if", "recompute=full")
    assert from_file == expected

    phone, phone_problems = open_page(browser, page.url, PHONE)  # the link alone reproduces the view
    phone.wait_for_selector("[data-testid=mfu]")
    assert float(phone.locator("[data-testid=mfu]").get_attribute("data-value")) == expected["mfu"]
    assert fits_the_screen(phone)
    phone.screenshot(path=artifacts / "phone-estimate.png", full_page=True)
    assert problems == [] and phone_problems == []


def test_the_page_names_the_field_of_a_bad_input(server, browser):
    page, _ = open_page(browser, server, LAPTOP)
    page.fill("#n-gpus", "6")
    page.click("summary:has-text('Parallelism')")
    page.fill("#tp", "4")
    page.click("#run")
    error = page.locator("[data-testid=error]")
    error.wait_for(state="visible")
    assert "training.tp" in error.inner_text()
    assert page.get_attribute("#tp", "aria-invalid") is not None


def test_an_uploaded_config_json_is_estimated(server, browser):
    page, problems = open_page(browser, server, LAPTOP)
    page.click("#custom-model summary")
    page.set_input_files("#config-file", str(REPO / "tests" / "data" / "hf" / "Qwen2.5-7B.json"))
    expect(page.locator("#model-info")).to_contain_text("from your config.json")
    page.click("#run")
    page.wait_for_selector("[data-testid=mfu]")
    assert "7.62 B" in page.inner_text("[data-testid=model-info]")
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
                          "tokens": 1e9}}


def fill_small_job(page) -> None:
    page.select_option("#model-preset", SMALL_JOB["model"])
    page.select_option("#gpu", SMALL_JOB["hardware"]["gpu"])
    page.fill("#n-gpus", str(SMALL_JOB["hardware"]["n_gpus"]))
    page.fill("#seq-len", str(SMALL_JOB["training"]["seq_len"]))
    page.fill("#global-batch", str(SMALL_JOB["training"]["global_batch"]))
    page.fill("#tokens", "1e9")


def test_the_what_fits_panel_shows_the_fit_api_answers_after_the_estimate(server, browser, artifacts):
    status, expected = post_json(f"{server}/api/fit", json.dumps(SMALL_JOB).encode())
    assert status == 200, expected
    page, problems = open_page(browser, server, LAPTOP)
    fill_small_job(page)
    page.click("#run")
    page.wait_for_selector("[data-testid=mfu]")
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
    phone.wait_for_selector("[data-testid=fit-micro-batch]")
    assert int(phone.get_attribute("[data-testid=fit-micro-batch]", "data-value")) == micro_batch["value"]
    assert fits_the_screen(phone)
    phone.screenshot(path=artifacts / "phone-fit.png", full_page=True)
    assert problems == [] and phone_problems == []


def test_the_what_fits_panel_waits_without_blocking_the_estimate_and_names_the_field_of_an_error(server, browser):
    page, _ = open_page(browser, server, LAPTOP)
    held = []
    page.route("**/api/fit", lambda route: held.append(route))  # held back: the estimate renders first
    fill_small_job(page)
    page.click("#run")
    page.wait_for_selector("[data-testid=mfu]")
    status = page.locator("[data-testid=fit-status]")
    expect(status).to_contain_text("…")
    assert page.locator("[data-testid=fit-micro-batch]").count() == 0
    assert len(held) == 1
    held[0].fulfill(status=422, content_type="application/json",
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
    with page.expect_request("**/api/estimate") as request:
        page.click("#run")
    page.wait_for_selector("[data-testid=memory]")

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
    again.wait_for_selector("[data-testid=memory]")
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
    error = page.locator("[data-testid=error]")
    error.wait_for(state="visible")
    assert "training.mean_seq_len" in error.inner_text()
    assert page.get_attribute("#mean-seq-len", "aria-invalid") is not None
    assert page.get_attribute("#lora-rank", "aria-invalid") is None
    assert "pack=0" not in page.url  # a failed run leaves the link as it was
