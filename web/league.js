// The league (GET /api/v1/league, docs/api.md): every kept model of every fight run and
// the scripted CPU at levels 1, 5 and 9, rated (Glicko-2) from the matches the workers
// play between them; and the head-to-head matrix of the best rated that have played. The cells come from
// pure functions (web/tests/unit/league.test.mjs); renderLeague() needs a browser.
import { $, el } from "./dom.js";
import { TOKEN, relativePrefix } from "./api.js";
import { fmtInt } from "./formats.js";
import { startPlay } from "./play.js";
import { state } from "./state.js";

// ---------------------------------------------------------------- pure
// A rating as the tables show it: "1687 ± 140" (the 95 % interval's half width), or
// "–" before the first match.
export function ratingCell(rating, deviation, matches) {
  if (!matches || rating === null || rating === undefined) return "–";
  return Math.round(rating) + " ± " + Math.round(1.96 * deviation);
}

// A head-to-head cell: "78 % (9)" with its tooltip "7-0-2, 95 % interval 45-94 %";
// "" where the two never met.
export function headToHeadCell(c) {
  if (!c) return ["", ""];
  const pct = (x) => Math.round(100 * x);
  return [pct(c.win_rate) + " % (" + c.matches + ")", c.won + "-" + c.drawn + "-" + c.lost + ", 95 % interval " + pct(c.low) + "-" + pct(c.high) + " %"];
}

// Who a row is: "fox v812 · fox", "cpu 9 · scripted".
export const playerCell = (p) => p.player + " · " + (p.cpu !== null ? "scripted CPU" : p.human ? "people, in the browser" : p.side);

// ---------------------------------------------------------------- DOM
export function renderLeague(t) {
  $("league-hint").textContent = fmtInt(t.matches) + " matches played · ratings ± their 95 % interval";
  const tbody = $("league-table").tBodies[0];
  tbody.innerHTML = "";
  for (const p of t.players) {
    const tr = el("tr");
    tr.dataset.player = p.player;
    tr.append(el("td", null, playerCell(p)), el("td", "num", ratingCell(p.rating, p.deviation, p.matches)),
      el("td", "num", fmtInt(p.matches)), el("td", "num", p.won + "-" + p.drawn + "-" + p.lost));
    // A model can be played here, in the browser (play.js); its run's routes from GET /runs.
    const pl = el("td");
    const run = p.run !== null && state.runs.find((r) => r.name === p.run);
    if (run) {
      const b = el("button", "btn play-btn", "Play");
      b.addEventListener("click", () => startPlay(relativePrefix(run.prefix), p.version, p.player, TOKEN));
      pl.append(b);
    }
    tr.append(pl);
    tbody.append(tr);
  }
  const m = $("league-matrix");
  m.innerHTML = "";
  const head = el("tr");
  head.append(el("th", null, "row vs column"));
  for (const name of t.head_to_head_players) head.append(el("th", "num", name));
  m.append(head);
  t.head_to_head.forEach((row, i) => {
    const tr = el("tr");
    tr.append(el("th", null, t.head_to_head_players[i]));
    for (const c of row) {
      const [text, title] = headToHeadCell(c);
      const td = el("td", "num", text);
      if (title) td.title = title;
      tr.append(td);
    }
    m.append(tr);
  });
}
