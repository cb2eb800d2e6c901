// Retakes the README's dashboard screenshots (docs/img) from a running manager, such
// as the demo's after it has trained for a while:
//
//   scripts/demo.sh                      # in one terminal; let it train
//   cd web/tests && node screenshots.mjs http://127.0.0.1:8080 ../../docs/img
//
// Needs what scripts/browser-test.sh installs (Debian's chromium, `npm ci` here). It
// asserts nothing: the dashboard's behaviour is tested by dashboard.test.mjs.
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const [url, out] = process.argv.slice(2);
if (!url || !out) {
  console.error("usage: node screenshots.mjs MANAGER_URL OUTPUT_DIR");
  process.exit(2);
}
mkdirSync(out, { recursive: true });

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
});
try {
  const page = await (await browser.newContext({ viewport: { width: 1440, height: 900 } })).newPage();
  await page.goto(url, { waitUntil: "load" });
  // Let the charts load their history and draw.
  await page.waitForFunction(() => Number(document.querySelector('[data-chart="survival"] canvas')?.dataset.points || 0) > 0, null, { timeout: 30_000 });
  await page.waitForTimeout(1500);
  await page.locator("#progress").screenshot({ path: join(out, "dashboard-progress.png") });

  // Watch the first worker until a match is well under way.
  await page.waitForSelector("#live-worker option[value]:not([value=''])", { state: "attached", timeout: 30_000 });
  const id = await page.$eval("#live-worker option[value]:not([value=''])", (o) => o.value);
  await page.selectOption("#live-worker", id);
  await page.waitForFunction(() => window.shineLive.drawn > 300, null, { timeout: 60_000 });
  await page.locator("#live").scrollIntoViewIfNeeded();
  await page.locator("#live").screenshot({ path: join(out, "dashboard-live.png") });

  await page.locator("#bots").scrollIntoViewIfNeeded();
  await page.locator("#bots").screenshot({ path: join(out, "dashboard-bots.png") });
  console.log(`screenshots in ${out}`);
} finally {
  await browser.close();
}
