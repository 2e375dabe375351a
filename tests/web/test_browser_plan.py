"""Plan mode in a real headless Chromium: a plan is a job with visible progress and a working Cancel, the
time–cost chart (clickable and keyboard-navigable points, a shape per GPU type), the plan table, the CLI line
and link of the request as sent, one history entry per run, a shared link answered from the server's cache,
and the phone layout (the fixtures and helpers are in browser_support.py)."""

from __future__ import annotations

import json
import shlex

from playwright.sync_api import expect

from .browser_support import LAPTOP, PHONE, cli, fits_the_screen, get, needs_chromium, open_page

pytestmark = needs_chromium
PLAN_GPUS = ["H100-SXM5-80GB", "A100-SXM4-80GB"]


def _is_job_post(response) -> bool:
    return response.request.method == "POST" and "/api/plan/jobs" in response.url


def _plan(page, deadline_days: str) -> dict:
    """Press Plan; the POST /api/plan/jobs answer, once the page has drawn the result."""
    with page.expect_response(_is_job_post) as created:
        page.click("#run")
    page.wait_for_selector("#plan-view:not([hidden]) [data-testid=plan-point]")
    page.wait_for_selector("body:not([data-plan-running])")
    assert f"--deadline-days {deadline_days}" in page.inner_text("[data-testid=plan-cli]")
    return created.value.json()


def _cli_answer(page) -> dict:
    """What the CLI prints for the command line the page shows (the request it actually sent)."""
    words = shlex.split(page.inner_text("[data-testid=plan-cli]"))
    assert words[:2] == ["trainrig", "plan"]
    return cli(*words[1:])


def _set_up_plan(page, deadline_days: str) -> None:
    page.select_option("#model-preset", "llama3-8b")
    page.fill("#tokens", "1e11")
    page.check("input[name=mode][value=plan]")
    page.click("#gpu-types-box summary")
    for gpu in PLAN_GPUS:
        page.check(f"#gpu-types input[value='{gpu}']")
    page.fill("#max-gpus", "64")
    page.fill("#deadline", deadline_days)


def test_the_page_plans_like_the_cli_and_draws_the_time_cost_chart(server, browser, artifacts):
    page, problems = open_page(browser, server, LAPTOP)
    _set_up_plan(page, "30")
    created = _plan(page, "30")
    assert created["cached"] is False
    cli_line = page.inner_text("[data-testid=plan-cli]")
    for flag in ("--model llama3-8b", "--tokens 1e11", "--max-gpus 64", "--deadline-days 30"):
        assert flag in cli_line
    assert set(cli_line.split("--gpus ")[1].split()[0].split(",")) == set(PLAN_GPUS)
    expected = _cli_answer(page)

    drawn = [p for p in expected["points"] if p["total_time_s"] > 0 and p["cost_usd"] > 0]
    assert page.locator("[data-testid=plan-point]").count() == len(drawn)
    assert page.locator("[data-testid=plan-table] tbody tr:not(.apart)").count() == len(expected["plans"])
    best = expected["plans"][0]["estimate"]
    assert float(page.locator("[data-testid=mfu]").get_attribute("data-value")) == best["mfu"]
    assert page.inner_text("[data-testid=node-ram]") == f"{expected['plans'][0]['node']['ram_gb']} GB"

    # each GPU type has its own shape as well as its own colour
    shapes = page.evaluate("""Object.fromEntries([...document.querySelectorAll('[data-testid=plan-point]')]
        .map((p) => [p.dataset.gpu, p.tagName + (p.getAttribute('d') || '').length]))""")
    tags = page.evaluate("""[...new Set([...document.querySelectorAll('[data-testid=plan-point]')]
        .map((p) => p.dataset.gpu + ':' + p.tagName))]""")
    assert len(shapes) == len({p["gpu"] for p in drawn}) and len({t.split(":")[1] for t in tags}) == len(shapes)

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

    # the chart is one tab stop; the arrow keys move between named points; Enter on a plan shows its estimate
    assert page.locator("#plan-chart [tabindex='0']").count() == 1
    page.focus("#plan-chart [tabindex='0']")
    assert page.evaluate("document.activeElement.dataset.rank") == "1"
    names = []
    for _ in range(page.locator("#plan-chart [tabindex]").count()):
        names.append(page.evaluate("document.activeElement.getAttribute('aria-label')"))
        if page.evaluate("document.activeElement.dataset.rank") == "2":
            break
        page.keyboard.press("ArrowRight")
    else:
        for _ in range(len(names)):
            page.keyboard.press("ArrowLeft")
            if page.evaluate("document.activeElement.dataset.rank") == "2":
                break
    assert all(name and " × " in name for name in names)
    assert page.evaluate("document.activeElement.getAttribute('aria-label')").startswith("Plan 2: ")
    assert page.locator("#plan-chart [tabindex='0']").count() == 1
    page.keyboard.press("Enter")
    second = expected["plans"][1]
    assert float(page.locator("[data-testid=mfu]").get_attribute("data-value")) == second["estimate"]["mfu"]
    assert page.locator("#plan-table tr.selected [data-testid=plan-row-2]").count() == 1
    page.click("[data-testid=plan-row-1]")
    page.click(".plan-mark[data-rank='2']")  # a click on a plan's mark selects it too
    assert "sel=2" in page.url
    first_url = page.url
    # (after the keyboard checks: a full-page screenshot resizes the page, and the chart redraws)
    page.screenshot(path=artifacts / "laptop-plan.png", full_page=True)

    # a second run is a second history entry; Back returns to the first result, from the server's cache
    page.fill("#deadline", "20")
    assert page.locator("[data-testid=plan-stale]").is_visible()  # the result shown no longer answers the form
    _plan(page, "20")
    assert "deadline=20" in page.url and not page.locator("[data-testid=plan-stale]").is_visible()
    with page.expect_response(_is_job_post) as back:
        page.go_back()
    assert back.value.json()["cached"] is True
    # expect() polls from Playwright's side: a wait_for_function string would be eval'd in the page, which
    # the page's CSP (script-src 'self') refuses
    expect(page.locator("[data-testid=plan-cli]")).to_contain_text("--deadline-days 30")
    page.wait_for_selector("body:not([data-plan-running])")
    assert page.url == first_url and page.input_value("#deadline") == "30"

    # the shared link on a phone opens at once from the cache, and fits the screen
    phone = browser.new_page(viewport=PHONE)
    phone_problems: list[str] = []
    phone.on("pageerror", lambda error: phone_problems.append(str(error)))
    with phone.expect_response(_is_job_post) as shared:
        phone.goto(first_url)
    assert shared.value.json()["status"] == "done" and shared.value.json()["cached"] is True
    phone.wait_for_selector("body[data-ready='1'] [data-testid=plan-point]")
    assert "cache" in phone.inner_text("[data-testid=plan-source]")
    assert float(phone.locator("[data-testid=mfu]").get_attribute("data-value")) == second["estimate"]["mfu"]
    assert fits_the_screen(phone)
    outside = phone.evaluate("""(() => {
        const chart = document.querySelector('#plan-chart svg').getBoundingClientRect();
        return [...document.querySelectorAll('#plan-chart svg text')].filter((t) => {
          const b = t.getBoundingClientRect();
          return b.left < chart.left - 1 || b.right > chart.right + 1; }).map((t) => t.textContent); })()""")
    assert outside == []  # every label inside the chart
    phone.screenshot(path=artifacts / "phone-plan.png", full_page=True)
    assert problems == [] and phone_problems == []


# millions of configurations: still running when the test presses Cancel, on any machine
LARGE = {"#tokens": "1e12", "#max-gpus": "16384", "#global-batch": "256-4096"}


def open_large_plan(browser, server, viewport):
    """A page in plan mode with the large search filled in, not yet run."""
    page, problems = open_page(browser, server, viewport)
    page.select_option("#model-preset", "llama3-8b")
    page.check("input[name=mode][value=plan]")
    for selector, value in LARGE.items():
        page.fill(selector, value)
    return page, problems


def test_a_plan_shows_its_progress_and_cancel_stops_it(server, browser, artifacts):
    page, problems = open_large_plan(browser, server, LAPTOP)
    with page.expect_response(_is_job_post) as created:
        page.click("#run")
    job_id = created.value.json()["id"]
    page.wait_for_selector("[data-testid=plan-progress][data-status=running][data-total]")
    progress = page.inner_text("[data-testid=plan-progress-text]")
    assert "configurations evaluated" in progress and " of " in progress
    total = int(page.get_attribute("[data-testid=plan-progress]", "data-total"))
    assert f"{total:,}" in progress
    assert page.locator("#job-form fieldset:disabled").count() == page.locator("#job-form fieldset").count()
    page.screenshot(path=artifacts / "laptop-plan-progress.png", full_page=True)

    page.click("[data-testid=plan-cancel]")
    page.wait_for_selector("[data-testid=plan-progress]", state="hidden")
    status, body = get(f"{server}/api/plan/jobs/{job_id}")
    assert status == 200 and json.loads(body)["status"] == "cancelled"
    assert page.locator("#job-form fieldset:disabled").count() == 0
    assert page.locator("[data-testid=error]").is_hidden()
    page.screenshot(path=artifacts / "laptop-plan-cancelled.png", full_page=True)

    # the server keeps planning after the cancel: a small plan, one best plan per GPU type
    page.fill("#tokens", "1e11")
    page.fill("#max-gpus", "64")
    page.fill("#global-batch", "256")
    page.fill("#deadline", "30")
    page.click("#gpu-types-box summary")
    for gpu in PLAN_GPUS:
        page.check(f"#gpu-types input[value='{gpu}']")
    page.check("[data-testid=per-gpu-type]")
    _plan(page, "30")
    gpus = page.locator("[data-testid=plan-table] tbody tr td:nth-child(4)").all_inner_texts()
    assert len(gpus) == len(PLAN_GPUS) and all(any(g in row for row in gpus) for g in PLAN_GPUS)
    assert "pergpu=1" in page.url
    assert page.inner_text("[data-testid=plan-cli]").startswith("trainrig compare ")
    page.screenshot(path=artifacts / "laptop-plan-per-gpu-type.png", full_page=True)
    assert problems == []


def test_the_progress_and_cancel_fit_a_phone(server, browser, artifacts):
    page, problems = open_large_plan(browser, server, PHONE)
    page.click("#run")
    page.wait_for_selector("[data-testid=plan-progress][data-status=running]")
    assert fits_the_screen(page)
    page.screenshot(path=artifacts / "phone-plan-progress.png", full_page=True)
    page.click("[data-testid=plan-cancel]")
    page.wait_for_selector("[data-testid=plan-progress]", state="hidden")
    assert fits_the_screen(page) and problems == []


def test_plans_without_a_price_come_after_a_labelled_heading(server, browser, artifacts):
    """Plans with no price in the catalog (B200 has no priced offer) follow the priced ones under a
    heading of their own, as `trainrig plan` prints them in a table apart; each says why."""
    page, problems = open_page(browser, server, LAPTOP)
    page.select_option("#model-preset", "llama3-8b")
    page.fill("#tokens", "1e11")
    page.check("input[name=mode][value=plan]")
    page.click("#gpu-types-box summary")
    for gpu in ("H100-SXM5-80GB", "B200"):
        page.check(f"#gpu-types input[value='{gpu}']")
    page.fill("#max-gpus", "64")
    page.fill("#deadline", "30")
    answer = _plan(page, "30")
    expected = _cli_answer(page)
    rows = page.locator("[data-testid=plan-table] tbody tr")
    texts = rows.all_inner_texts()
    heading = [i for i, text in enumerate(texts) if text.startswith("Without a price")]
    unpriced = [p for p in expected["plans"] if p["estimate"]["cost_usd"] is None]
    assert unpriced and len(heading) == 1, texts
    first = next(i for i, p in enumerate(expected["plans"]) if p["estimate"]["cost_usd"] is None)
    assert heading[0] == first  # every priced plan above it, every unpriced one below
    assert all(p["estimate"]["cost_usd"] is None for p in expected["plans"][first:])
    assert f"({len(unpriced)})" in texts[heading[0]]
    for plan, text in zip(expected["plans"][first:], texts[heading[0] + 1:], strict=True):
        assert plan["no_price_reason"] in text
    assert answer["id"]
    page.screenshot(path=artifacts / "laptop-plan-unpriced.png", full_page=True)
    assert problems == []
