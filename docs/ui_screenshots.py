"""Take the screenshots in docs/ui.md: a real store, a real ``savegame ui``, Chromium.

The store holds the demo's runs (``savegame demo``: paused for approval, killed
mid-refund, resumed), the crash tests' ten-step run SIGKILLed after step 4 and
resumed by another process, and a few runs of the tests' shop (one waiting for
approval, one forked with an edit). Needs the test extra and Debian's Chromium:

    python docs/ui_screenshots.py          # writes docs/img/ui-*.png
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from tests.crash.harness import kill_after_step, run_to_end  # noqa: E402
from tests.ui.shop import wf  # noqa: E402

import savegame  # noqa: E402
from savegame.demo import run_demo  # noqa: E402

OUT = ROOT / "docs" / "img"
CHROMIUM = os.environ.get("SAVEGAME_TEST_CHROMIUM", "/usr/bin/chromium")


def fill(url: str) -> dict[str, str]:
    demo = run_demo(store=url, keep=False, auto="screenshots")
    for n in range(4):
        r = savegame.run(
            wf, {"order_id": f"o{n}", "amount": 20 + n}, thread_id=f"shop-{n}", store=url
        )
        if n % 2 == 0:
            savegame.approve(r.run_id, by="ana", store=url, workflow=wf)
    done = savegame.client.list_runs(workflow="shop", status="completed", store=url)[0]
    planned = next(h for h in savegame.client.history(done.run_id, store=url) if h.node == "plan")
    savegame.client.fork(planned.checkpoint_id, set={"order.amount": 5}, reason="coupon", by="ana",
                  store=url, workflow=wf, run=False)  # fmt: skip
    kill_after_step("start", url, "killed-after-step-4", 4)
    run_to_end("resume", url, "killed-after-step-4")
    return {"demo": demo.run_id, "shop": done.run_id, "crash": "killed-after-step-4"}


def main() -> None:
    from playwright.sync_api import sync_playwright

    OUT.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'ui.db'}"
        runs = fill(url)
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
        server = subprocess.Popen(
            [sys.executable, "-m", "savegame", "ui", "--store", url, "--port", str(port)],
            cwd=ROOT, env=env,
        )  # fmt: skip
        try:
            base = f"http://127.0.0.1:{port}"
            for _ in range(100):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    time.sleep(0.1)
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
                page = browser.new_page(viewport={"width": 1360, "height": 860})
                page.goto(f"{base}/runs")
                page.screenshot(path=OUT / "ui-runs.png")
                page.goto(f"{base}/runs/{runs['crash']}")
                page.locator("a.state-link").nth(5).click()
                page.locator("#state .tree").last.wait_for()
                page.screenshot(path=OUT / "ui-run.png", full_page=True)
                page.goto(f"{base}/runs/{runs['demo']}")
                page.screenshot(path=OUT / "ui-demo.png")
                page.goto(f"{base}/runs/{runs['shop']}")
                page.locator("input[name=a]").first.check()
                page.click("button:has-text('Diff A → B')")
                page.locator("#diff table.changes").wait_for()
                page.locator("#diff").scroll_into_view_if_needed()
                page.screenshot(path=OUT / "ui-diff.png")
                page.goto(f"{base}/approvals")
                page.screenshot(path=OUT / "ui-approvals.png")
                browser.close()
        finally:
            server.terminate()
            server.wait(10)
    print(f"wrote {', '.join(sorted(p.name for p in OUT.glob('ui-*.png')))} in {OUT}")


if __name__ == "__main__":
    main()
