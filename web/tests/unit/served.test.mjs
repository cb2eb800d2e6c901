// The modules as the manager serves them: every web/*.js compiled into the binary
// (manager/src/api/web.rs, MODULES), every relative import one of them, the page loading
// its entry as a module; and every module but the entry importable without a browser.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const WEB = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const files = readdirSync(WEB).filter((f) => f.endsWith(".js")).sort();
const webRs = readFileSync(join(WEB, "..", "manager", "src", "api", "web.rs"), "utf8");
const served = [...webRs.matchAll(/\("([\w.-]+\.js)", include_str!\("\.\.\/\.\.\/\.\.\/web\/([\w.-]+\.js)"\)\)/g)].map((m) => {
  assert.equal(m[1], m[2], "served under its own name");
  return m[1];
});

test("web.rs serves every web/*.js, and nothing else", () => {
  assert.ok(files.includes("app.js"));
  assert.deepEqual([...served].sort(), files);
  const n = webRs.match(/const MODULES: \[\(&str, &str\); (\d+)\]/);
  assert.equal(Number(n[1]), files.length);
});

test("every import is a relative path to a served module", () => {
  for (const f of files) {
    const src = readFileSync(join(WEB, f), "utf8");
    for (const m of src.matchAll(/^\s*(?:import|export)\b[^;]*?\bfrom\s+"([^"]+)"/gms)) {
      assert.match(m[1], /^\.\/[\w.-]+\.js$/, `${f} imports ${m[1]}`);
      assert.ok(files.includes(m[1].slice(2)), `${f} imports ${m[1]}`);
    }
  }
});

test("index.html loads app.js as a module, and no other script", () => {
  const html = readFileSync(join(WEB, "index.html"), "utf8");
  assert.deepEqual([...html.matchAll(/<script\b[^>]*>/g)].map((m) => m[0]), ['<script type="module" src="app.js">']);
});

test("every module but the entry imports without a browser (no DOM at import)", async () => {
  for (const f of files.filter((f) => f !== "app.js")) await import(join(WEB, f));
});

test("the dashboard cites only files the repository has", () => {
  // A design document it once cited is not part of the repository.
  const gone = "DESIGN" + ".md";
  for (const f of [...files, "index.html", "style.css"]) assert.ok(!readFileSync(join(WEB, f), "utf8").includes(gone), f);
});
