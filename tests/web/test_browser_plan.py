"""Plan mode in a real headless Chromium: the time–cost chart, the plan table and links to a chosen plan
(the fixtures and helpers are in browser_support.py)."""

from __future__ import annotations

from .browser_support import LAPTOP, PHONE, cli, fits_the_screen, needs_chromium, open_page

pytestmark = needs_chromium
PLAN_GPUS = ["H100-SXM5-80GB", "A100-SXM4-80GB"]


def test_the_page_plans_like_the_cli_and_draws_the_time_cost_chart(server, browser, artifacts):
    page, problems = open_page(browser, server, LAPTOP)
    page.select_option("#model-preset", "llama3-8b")
    page.fill("#tokens", "1e11")
    page.check("input[name=mode][value=plan]")
    page.click("#gpu-types-box summary")
    for gpu in PLAN_GPUS:
        page.check(f"#gpu-types input[value='{gpu}']")
    page.fill("#max-gpus", "64")
    page.fill("#deadline", "30")
    page.click("#run")
    page.wait_for_selector("[data-testid=plan-point]")
    expected = cli("plan", "--model", "llama3-8b", "--tokens", "1e11", "--seq-len", "4096", "--global-batch", "256",
                   "--precision", "bf16", "--method", "full", "--gpus", ",".join(PLAN_GPUS), "--max-gpus", "64",
                   "--deadline-days", "30")

    drawn = [p for p in expected["points"] if p["total_time_s"] > 0 and p["cost_usd"] > 0]
    assert page.locator("[data-testid=plan-point]").count() == len(drawn)
    assert page.locator("[data-testid=plan-table] tbody tr").count() == len(expected["plans"])
    best = expected["plans"][0]["estimate"]
    assert float(page.locator("[data-testid=mfu]").get_attribute("data-value")) == best["mfu"]
    assert page.inner_text("[data-testid=node-ram]") == f"{expected['plans'][0]['node']['ram_gb']} GB"

    tooltip = page.locator("#tooltip")
    page.hover(".plan-mark[data-rank='1']")
    tooltip.wait_for(state="visible")
    assert "Plan 1" in tooltip.inner_text() and f"{expected['plans'][0]['n_gpus']} × " in tooltip.inner_text()
    page.mouse.move(0, 0)
    tooltip.wait_for(state="hidden")
    uncovered = page.evaluate("""[...document.querySelectorAll('[data-testid=plan-point]')].findIndex((dot) => {
        const box = dot.getBoundingClientRect();
        return document.elementFromPoint(box.x + box.width / 2, box.y + box.height / 2) === dot; })""")
    assert uncovered >= 0
    page.locator("[data-testid=plan-point]").nth(uncovered).hover()
    tooltip.wait_for(state="visible")
    assert " × " in tooltip.inner_text() and "time:" in tooltip.inner_text()
    page.screenshot(path=artifacts / "laptop-plan.png", full_page=True)

    second = expected["plans"][1]
    page.click("[data-testid=plan-row-2]")
    assert float(page.locator("[data-testid=mfu]").get_attribute("data-value")) == second["estimate"]["mfu"]
    assert "sel=2" in page.url

    phone, phone_problems = open_page(browser, page.url, PHONE)
    phone.wait_for_selector("[data-testid=plan-point]")
    assert float(phone.locator("[data-testid=mfu]").get_attribute("data-value")) == second["estimate"]["mfu"]
    assert fits_the_screen(phone)
    phone.screenshot(path=artifacts / "phone-plan.png", full_page=True)
    assert problems == [] and phone_problems == []
