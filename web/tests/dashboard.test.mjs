// End-to-end test of the dashboard in real headless Chromium against a real
// shine-manager with a real shine-worker playing (scripts/browser-test.sh starts both
// and passes their addresses). No mocks: the page's own polling, WebSocket and
// download link are exercised. Screenshots go to $SHINE_ARTIFACTS.
//
// Environment: SHINE_URL (manager), SHINE_ARTIFACTS (output folder), SHINE_WORKER_BIN
// (to check the downloaded model loads), CHROMIUM (default /usr/bin/chromium),
// SHINE_WARMUP_SECS (let training run this long first: fuller charts for screenshots).
import { chromium } from "playwright-core";
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import assert from "node:assert/strict";

const URL = process.env.SHINE_URL;
const ART = process.env.SHINE_ARTIFACTS;
const WORKER = process.env.SHINE_WORKER_BIN;
assert.ok(URL && ART && WORKER, "set SHINE_URL, SHINE_ARTIFACTS and SHINE_WORKER_BIN (scripts/browser-test.sh does)");
mkdirSync(ART, { recursive: true });

const steps = [];
async function step(name, f) {
  const t0 = Date.now();
  process.stdout.write(`--- ${name} ... `);
  await f();
  steps.push(name);
  console.log(`ok (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  // No sandbox (CI runs as root in a container), no GPU, and nothing that phones home.
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
// A laptop screen.
const context = await browser.newContext({ viewport: { width: 1440, height: 900 }, acceptDownloads: true });
const page = await context.newPage();
const errors = [];
page.on("pageerror", (e) => errors.push(String(e)));
page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });

try {
  await page.goto(URL, { waitUntil: "load" });
  const warmup = Number(process.env.SHINE_WARMUP_SECS || 0);
  if (warmup > 0) await page.waitForTimeout(warmup * 1000);

  await step("the progress charts show data", async () => {
    // Every chart must draw values once the worker has played and the trainer trained
    // (the script's config: tiny burn-in, frequent publishing, 20 % evaluation).
    const charts = ["survival", "reward", "loss", "mean_q", "train_sps", "ingest", "fill", "spi", "age"];
    await page.waitForFunction(
      (ids) => ids.every((id) => Number(document.querySelector(`[data-chart="${id}"] canvas`)?.dataset.points || 0) > 0),
      charts, { timeout: 120_000, polling: 500 },
    ).catch(async (e) => {
      const got = await page.evaluate((ids) => Object.fromEntries(ids.map((id) => [id, document.querySelector(`[data-chart="${id}"] canvas`)?.dataset.points])), charts);
      throw new Error(`charts without data: ${JSON.stringify(got)}: ${e.message}`);
    });
    // And the numbers shown are real ones, not placeholders.
    const values = await page.$$eval(".chart-value", (els) => els.map((e) => e.textContent));
    assert.ok(values.filter((v) => v !== "–").length >= 7, `chart values: ${values}`);
    const steps = await page.textContent("#kpi-steps");
    assert.ok(Number(steps.replace(/,/g, "")) > 0, `train steps in the header: ${steps}`);
    // A chart is drawn pixels, not just a count: the survival canvas is not blank.
    const inked = await page.$eval('[data-chart="ingest"] canvas', (c) => {
      const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
      return n / (d.length / 4);
    });
    assert.ok(inked > 0.02, `the ingest chart is nearly empty (${inked})`);
  });

  await step("the workers table lists the worker", async () => {
    await page.waitForSelector("#workers-table tbody tr[data-worker-id]", { timeout: 30_000 });
    const rows = await page.$$eval("#workers-table tbody tr[data-worker-id]", (trs) => trs.map((tr) => [...tr.cells].map((td) => td.textContent.trim())));
    assert.equal(rows.length, 1, `one worker: ${JSON.stringify(rows)}`);
    const [id, host, backend, envs, eps, model, fps, skipped, transitions, lastUpload, state] = rows[0];
    assert.match(id, /^\d+$/);
    assert.ok(host.length > 0 && host !== "–", `host ${host}`);
    assert.equal(backend, "sim");
    assert.equal(envs, "1");
    assert.equal(Number(eps), 0.4, "a lone worker explores at the ladder's base");
    assert.match(model, /^v\d+$/);
    assert.ok(parseFloat(fps) > 0, `env fps ${fps}`);
    assert.equal(skipped, "0", "the simulator skips no frames");
    assert.ok(Number(transitions.replace(/,/g, "")) > 0, `transitions ${transitions}`);
    assert.match(lastUpload, /ago|just now/);
    assert.equal(state, "live");
    await page.screenshot({ path: join(ART, "dashboard.png"), fullPage: true });
    await page.locator("#progress").screenshot({ path: join(ART, "progress.png") });
  });

  await step("the live view draws frames that change, at the game's pace", async () => {
    const id = await page.$eval("#workers-table tbody tr[data-worker-id]", (tr) => tr.dataset.workerId);
    await page.selectOption("#live-worker", id);
    // The worker learns of the watcher from its long poll, then streams env 0.
    await page.waitForFunction(() => window.shineLive.drawn > 20, null, { timeout: 30_000, polling: 200 });
    await page.locator("#live").scrollIntoViewIfNeeded();
    // Rates use the time measured inside the page between the two snapshots, not the
    // nominal wait: on a loaded machine the wait plus two round trips runs long.
    const snap = () => page.evaluate(() => ({
      at: performance.now(),
      drawn: window.shineLive.drawn,
      game: window.shineLive.gameFrames,
      frame: window.shineLive.frame.frame,
      pixels: document.getElementById("stage").toDataURL(),
    }));
    const a = await snap();
    await page.waitForTimeout(4000);
    const b = await snap();
    const secs = (b.at - a.at) / 1000;
    const rate = (b.drawn - a.drawn) / secs;
    assert.ok(rate >= 30, `${rate.toFixed(1)} distinct game frames drawn per second over ${secs.toFixed(2)} s; want at least 30`);
    assert.notEqual(b.frame, a.frame, "the frame number moved");
    // Real time, not the simulator's hundreds of frames per second or samples of them:
    // the game time shown advances at about 60 frames per wall-clock second, in steps
    // of a frame or a few (a busy headless browser may draw fewer than 60 a second).
    // The band allows for the player catching up after a late post, or briefly
    // running dry, within the window.
    const pace = (b.game - a.game) / secs;
    assert.ok(pace >= 40 && pace <= 85, `game time advanced ${pace.toFixed(1)} frames per second over ${secs.toFixed(2)} s; want about 60`);
    assert.notEqual(a.pixels, b.pixels, "the canvas changed");
    // The panel: the frame number, the chosen action, one Q bar per action.
    const panel = await page.evaluate(() => ({
      frame: document.getElementById("live-frame").textContent,
      action: document.getElementById("live-action").textContent,
      bars: document.querySelectorAll("#qbars .qrow").length,
      names: [...document.querySelectorAll("#qbars .qrow .name")].map((e) => e.textContent),
      last: window.shineLive.frame,
    }));
    assert.match(panel.frame, /^\d+$/);
    assert.equal(panel.bars, 5, "the untouchable set's five actions");
    assert.ok(panel.names.includes(panel.action), `chosen action ${panel.action} among ${panel.names}`);
    for (const p of [panel.last.agent, panel.last.opponent]) {
      assert.ok(Number.isFinite(p.x) && Number.isFinite(p.y) && Math.abs(p.facing) === 1, JSON.stringify(p));
      assert.ok(p.action_name.length > 0 && p.stocks >= 0 && p.stocks <= 4, JSON.stringify(p));
    }
    await page.waitForTimeout(300);
    await page.locator("#live").screenshot({ path: join(ART, "live.png") });
    await page.screenshot({ path: join(ART, "dashboard-watching.png"), fullPage: true });
  });

  await step("a model downloaded through the page's link is a valid model file", async () => {
    await page.waitForSelector("#models-table tbody tr[data-version] a.download", { timeout: 60_000 });
    await page.locator("#bots").scrollIntoViewIfNeeded();
    await page.locator("#bots").screenshot({ path: join(ART, "bots.png") });
    // One version's row, by its number: the table re-renders when a newer model is
    // published, and "the first row" may then be another model between two reads.
    const version = await page.$eval("#models-table tbody tr[data-version]", (tr) => tr.dataset.version);
    const link = page.locator(`#models-table tbody tr[data-version="${version}"] a.download`);
    const shown = await link.textContent();
    const [download] = await Promise.all([page.waitForEvent("download"), link.click()]);
    assert.equal(download.suggestedFilename(), shown, "the file is named as the page says");
    const file = join(ART, shown);
    await download.saveAs(file);
    // safetensors: u64 LE header length, a JSON header, then the tensors' bytes.
    const bytes = readFileSync(file);
    const n = Number(bytes.readBigUInt64LE(0));
    const header = JSON.parse(bytes.subarray(8, 8 + n).toString("utf8"));
    const meta = header.__metadata__;
    assert.ok(meta && meta.action_set === "untouchable", `metadata: ${JSON.stringify(meta)}`);
    const end = Math.max(...Object.entries(header).filter(([k]) => k !== "__metadata__").map(([, t]) => t.data_offsets[1]));
    assert.equal(8 + n + end, statSync(file).size, "tensors fill the file exactly");
    // The real test of validity: the worker plays it, with the command the page shows.
    const cmd = await page.textContent("#play-cmd");
    assert.match(cmd, /^shine-worker play --model shine-untouchable-v\d+\.safetensors$/);
    const r = spawnSync(WORKER, ["play", "--model", file, "--episodes", "1", "--quiet"], { encoding: "utf8", timeout: 120_000 });
    assert.equal(r.status, 0, `shine-worker play failed:\n${r.stdout}\n${r.stderr}`);
  });

  await step("stop watching", async () => {
    await page.click("#live-stop");
    await page.waitForFunction(() => window.shineLive.worker === null);
  });

  assert.deepEqual(errors, [], "no errors in the page's console");
  console.log(`all ${steps.length} steps passed; screenshots in ${ART}`);
} catch (e) {
  await page.screenshot({ path: join(ART, "failure.png"), fullPage: true }).catch(() => {});
  console.error(`\nFAILED: ${e.stack || e}\nconsole errors: ${JSON.stringify(errors)}\nscreenshot: ${join(ART, "failure.png")}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
