// End-to-end test of the dashboard in real headless Chromium against a real
// shine-manager training two runs, `default` and `fight`, with a real shine-worker
// playing for each (scripts/browser-test.sh starts them and passes their addresses).
// No mocks: the page's own polling, WebSocket and download links are exercised.
// Screenshots go to $SHINE_ARTIFACTS.
//
// Two parts, with a manager restart between them (the script does it):
//   node dashboard.test.mjs                  the run `default`'s pages, then the runs
//                                            table, the compare charts and the run picker;
//                                            writes what the charts drew to before-restart.json
//   node dashboard.test.mjs --after-restart  the compare and progress charts still draw
//                                            the samples from before the restart
//
// Environment: SHINE_URL (manager), SHINE_TOKEN (its token: the page is also opened as
// /?token=), SHINE_ARTIFACTS (output folder), SHINE_WORKER_BIN (to check the downloaded
// model loads), SHINE_RESTART_AT (--after-restart: unix time between the old manager's
// exit and the new one's start), SHINE_PLAY_CHECK (manager/examples/play_check: replays
// the match the test plays in the page), CHROMIUM (default /usr/bin/chromium),
// SHINE_WARMUP_SECS (let training run this long first: fuller charts for screenshots).
import { chromium } from "playwright-core";
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import assert from "node:assert/strict";

const URL = process.env.SHINE_URL;
const TOKEN = process.env.SHINE_TOKEN;
const ART = process.env.SHINE_ARTIFACTS;
const WORKER = process.env.SHINE_WORKER_BIN;
const PLAY_CHECK = process.env.SHINE_PLAY_CHECK;
const AFTER_RESTART = process.argv.includes("--after-restart");
const RESTART_AT = Number(process.env.SHINE_RESTART_AT);
assert.ok(URL && TOKEN && ART && WORKER && PLAY_CHECK, "set SHINE_URL, SHINE_TOKEN, SHINE_ARTIFACTS, SHINE_WORKER_BIN and SHINE_PLAY_CHECK (scripts/browser-test.sh does)");
assert.ok(!AFTER_RESTART || RESTART_AT > 0, "--after-restart needs SHINE_RESTART_AT (scripts/browser-test.sh sets it)");
mkdirSync(ART, { recursive: true });
// What the first part saw, for the second.
const BEFORE = join(ART, "before-restart.json");
const RUNS = ["default", "fight"];
const COMPARE = ["survival", "train_sps", "loss", "spi"];
// The limit of every wait for something that must happen (data drawn, a row listed, a
// poll answered): long enough that only a hang reaches it, on any machine (a loaded
// 2-core VM running debug builds). A wait ends on its event, so it costs nothing when
// all is well. Also Playwright's default for the waits that name no timeout.
const HANG = 600_000;

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
  timeout: HANG,
  // No sandbox (CI runs as root in a container), no GPU, and nothing that phones home.
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
// A laptop screen.
const context = await browser.newContext({ viewport: { width: 1440, height: 900 }, acceptDownloads: true });
const page = await context.newPage();
page.setDefaultTimeout(HANG);
const errors = [];
page.on("pageerror", (e) => errors.push(String(e)));
page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });

// The compare charts' test hooks: per chart, how many runs have a line, the values
// drawn, the first and last time drawn, and per run (the legend) the same.
const compareCharts = () => page.evaluate(() => Object.fromEntries([...document.querySelectorAll("[data-compare]")].map((card) => {
  const num = (v) => (v ? Number(v) : null);
  const c = card.querySelector("canvas").dataset;
  const runs = Object.fromEntries([...card.querySelectorAll(".legend [data-run]")].map((e) => [e.dataset.run, { points: num(e.dataset.points), segments: num(e.dataset.segments), t0: num(e.dataset.t0), t1: num(e.dataset.t1) }]));
  return [card.dataset.compare, { runs: num(c.runs), points: num(c.points), t0: num(c.t0), t1: num(c.t1), legend: runs }];
})));

// Waits until every compare chart draws both runs.
async function compareChartsDrawn(timeout) {
  await page.waitForFunction(
    (ids) => ids.every((id) => {
      const c = document.querySelector(`[data-compare="${id}"] canvas`);
      return c && Number(c.dataset.runs) === 2 && Number(c.dataset.points) > 0;
    }),
    COMPARE, { timeout, polling: 500 },
  ).catch(async (e) => { throw new Error(`compare charts: ${JSON.stringify(await compareCharts())}: ${e.message}`); });
}

// A section's screenshot, cut from a full-page one: there the sticky header stays at
// the top of the page instead of covering the section.
async function shootSection(selector, file) {
  const clip = await page.$eval(selector, (e) => {
    const r = e.getBoundingClientRect();
    return { x: r.left + window.scrollX, y: r.top + window.scrollY, width: r.width, height: r.height };
  });
  await page.screenshot({ path: join(ART, file), fullPage: true, clip });
}

// The share of a canvas's pixels close to a color (a line drawn in it).
const inkOf = (selector, rgb) => page.$eval(selector, (c, [r, g, b]) => {
  const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 200 && Math.abs(d[i] - r) + Math.abs(d[i + 1] - g) + Math.abs(d[i + 2] - b) < 60) n++;
  return n / (d.length / 4);
}, rgb);

try {
  await page.goto(URL, { waitUntil: "load" });
  const warmup = Number(process.env.SHINE_WARMUP_SECS || 0);
  if (warmup > 0 && !AFTER_RESTART) await page.waitForTimeout(warmup * 1000);

  if (!AFTER_RESTART) {

    await step("the progress charts show data", async () => {
      // Every chart must draw values once the worker has played and the trainer trained
      // (the script's config: tiny burn-in, frequent publishing, 20 % evaluation).
      const charts = ["survival", "reward", "loss", "mean_q", "train_sps", "ingest", "fill", "spi", "age"];
      await page.waitForFunction(
        (ids) => ids.every((id) => Number(document.querySelector(`[data-chart="${id}"] canvas`)?.dataset.points || 0) > 0),
        charts, { timeout: HANG, polling: 500 },
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
      await page.waitForSelector("#workers-table tbody tr[data-worker-id]", { timeout: HANG });
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
      await page.waitForFunction(() => window.shineLive.drawn > 20, null, { timeout: HANG, polling: 200 });
      await page.locator("#live").scrollIntoViewIfNeeded();
      // The pace uses the time measured inside the page between the two snapshots, not
      // the wait: on a loaded machine the wait plus two round trips runs long.
      const snap = () => page.evaluate(() => ({
        at: performance.now(),
        drawn: window.shineLive.drawn,
        game: window.shineLive.gameFrames,
        frame: window.shineLive.frame.frame,
        pixels: document.getElementById("stage").toDataURL(),
      }));
      const a = await snap();
      // Counts, not rates in a fixed time: 120 more distinct game frames drawn and 300
      // more frames of game time shown (5 s of the game), however long this machine
      // takes to play them. (That the page plays them one by one, one per 1/60 s, when
      // it has them is web/tests/unit/live.test.mjs's: advance.)
      await page.waitForFunction(([drawn, game]) => window.shineLive.drawn >= drawn + 120 && window.shineLive.gameFrames >= game + 300,
        [a.drawn, a.game], { timeout: HANG, polling: 200 })
        .catch(async (e) => { throw new Error(`playback stalled: before ${JSON.stringify({ drawn: a.drawn, game: a.game })}, now ${JSON.stringify(await page.evaluate(() => ({ drawn: window.shineLive.drawn, game: window.shineLive.gameFrames })))}: ${e.message}`); });
      const b = await snap();
      const secs = (b.at - a.at) / 1000;
      assert.notEqual(b.frame, a.frame, "the frame number moved");
      // Real time, not the simulator's hundreds of frames per second or samples of them:
      // the game time shown advances at most at about 60 frames per wall-clock second,
      // in steps of a frame or a few (a busy headless browser may draw fewer than 60 a
      // second). The ceiling allows for the player catching up after a late post. Only
      // the ceiling: a slow machine's worker may stream fewer than 60 a second, which
      // lowers the pace and says nothing about the page.
      const pace = (b.game - a.game) / secs;
      assert.ok(pace <= 85, `game time advanced ${pace.toFixed(1)} frames per second over ${secs.toFixed(2)} s; want about 60, never more than real time`);
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
      await page.waitForSelector("#models-table tbody tr[data-version] a.download", { timeout: HANG });
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
      const r = spawnSync(WORKER, ["play", "--model", file, "--episodes", "1", "--quiet"], { encoding: "utf8", timeout: HANG });
      assert.equal(r.status, 0, `shine-worker play failed:\n${r.stdout}\n${r.stderr}`);
    });

    await step("stop watching", async () => {
      await page.click("#live-stop");
      await page.waitForFunction(() => window.shineLive.worker === null);
    });

    await step("the runs table lists both runs, what differs between them highlighted", async () => {
      // Both workers registered (one per run), and each run trained a while.
      await page.waitForFunction(() => {
        const rows = [...document.querySelectorAll("#runs-table tbody tr[data-run]")];
        return rows.length === 2 && rows.every((tr) => tr.querySelector('[data-key="workers"]').textContent === "1");
      }, null, { timeout: HANG, polling: 500 });
      assert.ok(await page.isVisible("#run-select"), "with two runs the header has the run picker");
      const rows = await page.$$eval("#runs-table tbody tr[data-run]", (trs) => trs.map((tr) => ({
        run: tr.dataset.run,
        selected: tr.classList.contains("selected"),
        cells: Object.fromEntries([...tr.querySelectorAll("td[data-key]")].map((td) => [td.dataset.key, { text: td.textContent.trim(), diff: td.classList.contains("diff") }])),
      })));
      assert.deepEqual(rows.map((r) => r.run), RUNS);
      assert.deepEqual(rows.map((r) => r.selected), [true, false], "the page shows default (no ?run=)");
      const [def, fight] = rows.map((r) => r.cells);
      assert.equal(def.action_set.text, "untouchable");
      assert.equal(fight.action_set.text, "fight");
      assert.equal(fight.task.text, "fight");
      for (const r of [def, fight]) {
        assert.equal(r.status.text, "training");
        assert.ok(r.action_set.diff && r.task.diff, `action set and task differ: ${JSON.stringify(r)}`);
        assert.ok(!r.weight.diff && r.weight.text === "1", `same weight: ${JSON.stringify(r.weight)}`);
        assert.ok(Number(r.train_steps.text.replace(/,/g, "")) > 0, `train steps ${r.train_steps.text}`);
        assert.match(r.model_version.text, /^v\d+$/);
        assert.equal(r.group.text, "alone", "runs of different action sets train alone");
      }
      // The settings side by side: by default only the keys that differ, all marked.
      const settings = () => page.$$eval("#settings-table tbody tr[data-key]", (trs) => trs.map((tr) => ({
        key: tr.dataset.key,
        diff: tr.classList.contains("diff"),
        values: [...tr.querySelectorAll("td[data-run]")].map((td) => [td.dataset.run, td.textContent, td.classList.contains("diff")]),
      })));
      const differ = await settings();
      assert.deepEqual(differ.map((s) => s.key), ["game.action_set", "game.task"]);
      for (const s of differ) assert.ok(s.diff && s.values.every(([, , d]) => d), JSON.stringify(s));
      assert.deepEqual(differ[0].values.map(([run, v]) => [run, v]), [["default", "untouchable"], ["fight", "fight"]]);
      const heads = await page.$$eval("#settings-table thead th[data-run]", (ths) => ths.map((th) => th.dataset.run));
      assert.deepEqual(heads, RUNS);
      // All of them on request: the same ones marked, the rest not.
      await page.check("#settings-all");
      const all = await settings();
      assert.ok(all.length > 20, `${all.length} settings`);
      assert.deepEqual(all.filter((s) => s.diff).map((s) => s.key), ["game.action_set", "game.task"]);
      const lr = all.find((s) => s.key === "dqn.lr");
      assert.ok(lr && !lr.diff && lr.values.length === 2 && lr.values[0][1] === lr.values[1][1], `dqn.lr: ${JSON.stringify(lr)}`);
      await shootSection("#runs", "runs-all-settings.png");
      await page.uncheck("#settings-all");
      assert.equal((await settings()).length, 2);
      await shootSection("#runs", "runs.png");
    });

    await step("the compare charts overlay both runs and update", async () => {
      // The fight run's first evaluation can take a while: its survival curve starts then.
      await compareChartsDrawn(HANG);
      const a = await compareCharts();
      for (const id of COMPARE) {
        assert.deepEqual(Object.keys(a[id].legend), RUNS, `${id}: the legend names the runs`);
        for (const run of RUNS) assert.ok(a[id].legend[run].points > 0, `${id}: ${run} has a line: ${JSON.stringify(a[id])}`);
      }
      // Both runs' lines were stroked from the data the page had (a line can cover the
      // other's pixels, so the segments drawn are counted, not seen; the pixels of a line
      // drawn alone are checked in the run's own progress chart, below).
      await page.waitForFunction(
        (runs) => runs.every((run) => Number(document.querySelector(`[data-compare="train_sps"] .legend [data-run="${run}"]`)?.dataset.segments) > 0),
        RUNS, { timeout: HANG, polling: 500 },
      ).catch(async (e) => { throw new Error(`train steps/s: a run's line has no segment: ${JSON.stringify(await compareCharts())}: ${e.message}`); });
      // The picked run's line drawn alone, in its progress chart's color (charts.js
      // CHARTS: #4fb3ff): its pixels are there.
      await page.waitForFunction(() => Number(document.querySelector('[data-chart="train_sps"] canvas').dataset.points) >= 2, null, { timeout: HANG, polling: 500 });
      const ink = await inkOf('[data-chart="train_sps"] canvas', [0x4f, 0xb3, 0xff]);
      assert.ok(ink > 0, `the progress chart's line of train steps/s drew no pixel of its color (${ink})`);
      // Updates: new samples reach every chart, for both runs.
      await page.waitForFunction(
        ([ids, before]) => ids.every((id) => [...document.querySelectorAll(`[data-compare="${id}"] .legend [data-run]`)]
          .every((e) => Number(e.dataset.t1) > before[id].legend[e.dataset.run].t1)),
        [COMPARE, a], { timeout: HANG, polling: 500 },
      ).catch(async (e) => { throw new Error(`no updates: before ${JSON.stringify(a)}, now ${JSON.stringify(await compareCharts())}: ${e.message}`); });
      const b = await compareCharts();
      await shootSection("#compare", "compare.png");
      // For the part after the restart: where the curves start now (the compare charts,
      // and the run default's own progress chart).
      const progressT0 = Number(await page.$eval('[data-chart="train_sps"] canvas', (c) => c.dataset.t0));
      writeFileSync(BEFORE, JSON.stringify({ compare: b, progress: { train_sps: progressT0 } }, null, 2));
    });

    await step("picking a run shows its progress, workers and bots, in the URL too", async () => {
      const defaultWorker = await page.$eval("#workers-table tbody tr[data-worker-id]", (tr) => tr.dataset.workerId);
      // Opened with the token in the URL: the pick must keep it there.
      await page.goto(`${URL}/?token=${TOKEN}`, { waitUntil: "load" });
      await page.waitForSelector('#run-select option[value="fight"]', { state: "attached", timeout: HANG });
      await page.selectOption("#run-select", "fight");
      const params = new URLSearchParams(await page.evaluate(() => location.search));
      assert.equal(params.get("run"), "fight");
      assert.equal(params.get("token"), TOKEN);
      // The fight run's worker, not default's, in the table and the live picker.
      const fightWorker = async () => {
        await page.waitForSelector("#workers-table tbody tr[data-worker-id]", { timeout: HANG });
        const ids = await page.$$eval("#workers-table tbody tr[data-worker-id]", (trs) => trs.map((tr) => tr.dataset.workerId));
        assert.equal(ids.length, 1, `one worker: ${ids}`);
        assert.notEqual(ids[0], defaultWorker, "the fight run's worker");
        await page.waitForSelector(`#live-worker option[value="${ids[0]}"]`, { state: "attached" });
        assert.deepEqual(await page.$$eval(".run-label", (els) => [...new Set(els.map((e) => e.textContent))]), ["fight"]);
        assert.equal(await page.$eval("#runs-table tr.selected", (tr) => tr.dataset.run), "fight");
        return ids[0];
      };
      const id = await fightWorker();
      await page.waitForFunction(() => Number(document.querySelector('[data-chart="train_sps"] canvas').dataset.points) > 0, null, { timeout: HANG });
      assert.match(await page.textContent("#progress-hint"), /action set fight/);
      // Its bots: the link names the file as the manager does, and downloads a fight model.
      await page.waitForSelector("#models-table tbody tr[data-version] a.download", { timeout: HANG });
      const version = await page.$eval("#models-table tbody tr[data-version]", (tr) => tr.dataset.version);
      const link = page.locator(`#models-table tbody tr[data-version="${version}"] a.download`);
      const shown = await link.textContent();
      assert.match(shown, /^shine-fight-fight-v\d+\.safetensors$/);
      assert.match(await link.getAttribute("href"), /^api\/v1\/runs\/fight\/models\/\d+\?token=/);
      const [download] = await Promise.all([page.waitForEvent("download"), link.click()]);
      assert.equal(download.suggestedFilename(), shown, "the file is named as the page says");
      const file = join(ART, shown);
      await download.saveAs(file);
      const bytes = readFileSync(file);
      const meta = JSON.parse(bytes.subarray(8, 8 + Number(bytes.readBigUInt64LE(0))).toString("utf8")).__metadata__;
      assert.equal(meta?.action_set, "fight", `metadata: ${JSON.stringify(meta)}`);
      assert.match(await page.textContent("#play-cmd"), /^shine-worker play --model shine-fight-fight-v\d+\.safetensors$/);
      // A reload shows the same run.
      await page.reload({ waitUntil: "load" });
      await page.waitForFunction(() => document.getElementById("run-select").value === "fight", null, { timeout: HANG });
      assert.equal(await fightWorker(), id);
      await page.evaluate(() => window.scrollTo(0, 0));
      await page.screenshot({ path: join(ART, "dashboard-fight.png"), fullPage: true });
      // And back.
      await page.selectOption("#run-select", "default");
      assert.equal(new URLSearchParams(await page.evaluate(() => location.search)).get("run"), "default");
      await page.waitForSelector(`#workers-table tbody tr[data-worker-id="${defaultWorker}"]`, { timeout: HANG });
    });

    await step("the league rates the fight run's models against the anchors, and its bots show their rating", async () => {
      // The script's config gives league matches a third of the workers' time.
      const rated = () => page.$$eval("#league-table tbody tr[data-player]", (trs) => trs.map((tr) => ({
        player: tr.dataset.player, cells: [...tr.cells].map((c) => c.textContent) })));
      await page.waitForFunction(() => [...document.querySelectorAll("#league-table tbody tr[data-player]")]
        .some((tr) => tr.dataset.player.startsWith("fight v") && Number(tr.cells[2].textContent) > 0), null, { timeout: HANG, polling: 500 })
        .catch(async (e) => { throw new Error(`no rated model: ${JSON.stringify(await rated())}: ${e.message}`); });
      const rows = await rated();
      for (const cpu of [1, 5, 9]) assert.ok(rows.some((r) => r.player === `cpu ${cpu}` && r.cells[0].endsWith("scripted CPU")), `anchor ${cpu}: ${JSON.stringify(rows)}`);
      // Only fight-task runs' models play: none of the untouchable run's.
      assert.ok(rows.every((r) => r.player.startsWith("fight v") || r.player.startsWith("cpu ")), JSON.stringify(rows));
      const model = rows.find((r) => r.player.startsWith("fight v") && Number(r.cells[2]) > 0);
      assert.match(model.cells[1], /^\d+ ± \d+$/, "a played model's rating and interval");
      // The table is best rated first, as the API orders it: the page's next poll's
      // answer, drawn in its order (matches go on, so an answer fetched apart from the
      // page's own may already order them otherwise).
      const api = await (await page.waitForResponse((r) => r.url().split("?")[0].endsWith("/api/v1/league"), { timeout: HANG })).json();
      const order = api.players.map((p) => p.player);
      const cols = api.head_to_head_players;
      // The table in the answer's order and the matrix of its players, read together
      // (the next poll may redraw both; it starts 5 s after this answer is drawn, so
      // that is waited for, not raced).
      const cells = await (await page.waitForFunction(([want, cols]) => {
        const shown = [...document.querySelectorAll("#league-table tbody tr[data-player]")].map((tr) => tr.dataset.player);
        const heads = [...document.querySelectorAll("#league-matrix tr:first-child th.num")].map((th) => th.textContent);
        const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
        if (!(shown.length > 0 && same(shown, want) && same(heads, cols))) return false;
        return [...document.querySelectorAll("#league-matrix td")].map((td) => [td.textContent, td.title]);
      }, [order, cols], { timeout: HANG, polling: 100 })
        .catch(async (e) => { throw new Error(`the page does not show the API's answer ${JSON.stringify(order)} ${JSON.stringify(cols)}: ${JSON.stringify((await rated()).map((r) => r.player))}: ${e.message}`); })).jsonValue();
      // The head-to-head matrix: its players as rows and columns, a cell where two met
      // (the API's cells, drawn with their match counts).
      assert.equal(cells.length, cols.length ** 2);
      api.head_to_head.flat().forEach((c, i) => {
        const [text, title] = cells[i];
        if (c === null) assert.equal(text, "", `cell ${i}`);
        else assert.ok(text.endsWith(`(${c.matches})`) && /^\d+ % \(\d+\)$/.test(text) && /95 % interval/.test(title), `cell ${i}: ${text} ${title}`);
      });
      // Players that have played, and only they: with fewer than 8, every opponent of
      // each is in the matrix too, so two met.
      for (const p of cols) assert.ok(api.players.find((q) => q.player === p).matches > 0, `${p} has not played`);
      if (cols.length < 8) assert.ok(api.head_to_head.flat().some((c) => c !== null), JSON.stringify(api));
      await shootSection("#league", "league.png");
      // The fight run's bots table has the rating column, filled for a played model.
      await page.selectOption("#run-select", "fight");
      await page.waitForFunction(() => [...document.querySelectorAll("#models-table tbody tr[data-version]")].some((tr) => / ± /.test(tr.cells[4].textContent)), null, { timeout: HANG, polling: 500 })
        .catch(async (e) => { throw new Error(`no rating in the bots table: ${await page.$eval("#models-table", (t) => t.textContent)}: ${e.message}`); });
      await page.selectOption("#run-select", "default");
    });

    await step("a bot played in the page: the keys move your fighter as the simulator says, the bot plays greedily, the result is rated", async () => {
      // The fight run's newest model, from its bots table's Play button.
      await page.selectOption("#run-select", "fight");
      const row = await page.waitForSelector("#models-table tbody tr[data-version]", { timeout: HANG });
      const version = Number(await row.getAttribute("data-version"));
      await row.$eval(".play-btn", (b) => b.click());
      await page.waitForFunction(() => window.shinePlay.hello !== null || window.shinePlay.refused !== null, null, { timeout: HANG });
      const hello = await page.evaluate(() => window.shinePlay.hello);
      assert.ok(hello, `the match started: ${JSON.stringify(await page.evaluate(() => window.shinePlay.refused))}`);
      assert.deepEqual([hello.run, hello.model_version, hello.bot_side, hello.your_side], ["fight", version, "fox", "marth"]);
      // The model as it was played (the registry may prune it before the match ends).
      const model = Buffer.from(await (await fetch(`${URL}/api/v1/runs/fight/models/${version}`, { headers: { Authorization: `Bearer ${TOKEN}` } })).arrayBuffer());
      // A second match from this page while this one runs: refused, saying why.
      const second = await page.evaluate(([v]) => new Promise((resolve) => {
        const ws = new WebSocket(location.origin.replace(/^http/, "ws") + "/api/v1/runs/fight/play/" + v + "?client=" + sessionStorage.getItem("shine.client"));
        ws.onmessage = (e) => resolve(JSON.parse(e.data));
        ws.onerror = () => resolve({ type: "error" });
      }), [version]);
      assert.equal(second.type, "refused", JSON.stringify(second));
      assert.equal(second.error.code, "already_playing");
      // Left held for a second, then an attack and a jump, keys as the page shows them.
      const keysShown = await page.$$eval("#play-keys tbody tr[data-key]", (trs) => Object.fromEntries(trs.map((tr) => [tr.dataset.key, tr.querySelector("kbd").textContent])));
      assert.deepEqual([keysShown.left, keysShown.a, keysShown.x], ["ArrowLeft", "KeyJ", "Space"]);
      const framesWith = (stick) => page.evaluate((x) => window.shinePlay.frames.filter((f) => f.pad.stick[0] === x).length, stick);
      await page.keyboard.down("ArrowLeft");
      // The picture of a match in progress (the README's), both fighters on the stage.
      await page.waitForFunction(() => window.shinePlay.frames.filter((f) => f.pad.stick[0] === -1).length >= 15, null, { timeout: HANG, polling: 20 });
      await shootSection("#play", "play.png");
      await page.waitForFunction(() => window.shinePlay.frames.filter((f) => f.pad.stick[0] === -1).length >= 60, null, { timeout: HANG, polling: 50 });
      await page.keyboard.up("ArrowLeft");
      // Each key held until a frame has run on it (a press shorter than a frame may fall
      // between two).
      for (const [key, button] of [["KeyJ", "a"], ["Space", "x"]]) {
        await page.keyboard.down(key);
        await page.waitForFunction((b) => window.shinePlay.frames.some((f) => f.pad.buttons.includes(b)), button, { timeout: HANG, polling: 20 });
        await page.keyboard.up(key);
      }
      assert.ok((await framesWith(-1)) >= 60);
      await page.waitForFunction(() => window.shinePlay.result !== null, null, { timeout: HANG, polling: 100 });
      const { frames, result } = await page.evaluate(() => ({ frames: window.shinePlay.frames, result: window.shinePlay.result }));
      // The whole match, ten seconds of it, on its clock; the line the page shows.
      assert.equal(result.ending, "time", JSON.stringify(result));
      assert.equal(frames.length, 600);
      assert.match(await page.textContent("#play-result"), /^(You won|The bot won|A draw) on time: stocks you \d, bot \d; damage dealt you \d+ %, bot \d+ % \(10\.0 s\) · counted in the league/);
      // Holding left moved the person's fighter left; a frame ran on the attack pressed.
      assert.ok(frames.some((f, i) => i > 0 && f.pad.stick[0] === -1 && f.opponent.x < frames[i - 1].opponent.x), "holding left moved you left");
      assert.ok(frames.some((f) => f.pad.buttons.includes("a")) && frames.some((f) => f.pad.buttons.includes("x")), "the attack and the jump reached the match");
      // Every frame the simulator's for those pads, and every decision the model's
      // greedy choice on the state streamed: replayed natively by play_check.
      const modelFile = join(ART, "play-model.safetensors"), matchFile = join(ART, "play-match.json");
      writeFileSync(modelFile, model);
      writeFileSync(matchFile, JSON.stringify({ seed: hello.seed, frames }));
      const checked = spawnSync(PLAY_CHECK, [modelFile, matchFile], { encoding: "utf8" });
      assert.equal(checked.status, 0, `play_check: ${checked.stdout}${checked.stderr}`);
      assert.match(checked.stdout, /^600 frames match the simulator's, \d+ decisions the model's greedy choices/);
      // The league table lists the people, with this match.
      await page.waitForFunction(() => [...document.querySelectorAll("#league-table tbody tr[data-player='human']")].some((tr) => Number(tr.cells[2].textContent) >= 1),
        null, { timeout: HANG, polling: 500 });
      assert.match(await page.textContent("#league-table tbody tr[data-player='human'] td"), /^human · people, in the browser$/);
      await page.selectOption("#run-select", "default");
    });
  } else {
    const before = JSON.parse(readFileSync(BEFORE, "utf8"));

    await step("after a manager restart the compare charts still draw the curves from before it", async () => {
      await compareChartsDrawn(HANG);
      const a = await compareCharts();
      for (const id of COMPARE) {
        // Every chart still draws samples from before the restart, for both runs.
        for (const run of RUNS) assert.ok(a[id].legend[run].t0 < RESTART_AT, `${id}, ${run}: nothing from before the restart: ${JSON.stringify(a[id])}`);
        // And they start where they started: these two have a value in every sample,
        // so their first is the run's first sample, which the history keeps however
        // it thins. (The survival and loss curves start at the first sample with a
        // value, which thinning may pass over.)
        if (id === "train_sps" || id === "spi") assert.ok(a[id].t0 <= before.compare[id].t0, `${id} starts at ${a[id].t0}, after ${before.compare[id].t0}`);
      }
      // And the new manager's samples join them, for both runs.
      await page.waitForFunction(
        ([ids, at]) => ids.every((id) => [...document.querySelectorAll(`[data-compare="${id}"] .legend [data-run]`)].every((e) => Number(e.dataset.t1) > at)),
        [COMPARE, RESTART_AT], { timeout: HANG, polling: 500 },
      ).catch(async (e) => { throw new Error(`no samples after the restart: ${JSON.stringify(await compareCharts())}: ${e.message}`); });
      await shootSection("#compare", "compare-after-restart.png");
    });

    await step("after the restart the run's progress goes on from before it, with both workers back", async () => {
      // GET /api/v1/stats starts with the samples from before the restart too.
      await page.waitForFunction(() => Number(document.querySelector('[data-chart="train_sps"] canvas').dataset.points) > 0, null, { timeout: HANG });
      const t0 = Number(await page.$eval('[data-chart="train_sps"] canvas', (c) => c.dataset.t0));
      assert.ok(t0 <= before.progress.train_sps, `the progress chart starts at ${t0}, after ${before.progress.train_sps}`);
      await page.waitForFunction(() => {
        const rows = [...document.querySelectorAll("#runs-table tbody tr[data-run]")];
        return rows.length === 2 && rows.every((tr) => tr.querySelector('[data-key="workers"]').textContent === "1" && tr.querySelector('[data-key="status"]').textContent === "training");
      }, null, { timeout: HANG, polling: 500 });
      await page.waitForSelector("#workers-table tbody tr[data-worker-id]", { timeout: HANG });
      await shootSection("#runs", "runs-after-restart.png");
      await page.evaluate(() => window.scrollTo(0, 0));
      await page.screenshot({ path: join(ART, "dashboard-after-restart.png"), fullPage: true });
    });
  }

  assert.deepEqual(errors, [], "no errors in the page's console");
  console.log(`all ${steps.length} steps passed; screenshots in ${ART}`);
} catch (e) {
  const shot = join(ART, AFTER_RESTART ? "failure-after-restart.png" : "failure.png");
  await page.screenshot({ path: shot, fullPage: true }).catch(() => {});
  console.error(`\nFAILED: ${e.stack || e}\nconsole errors: ${JSON.stringify(errors)}\nscreenshot: ${shot}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
