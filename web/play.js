// Play your bot: a match on the simulator between a published model and you, from the
// keyboard or a gamepad (WS {prefix}/play/{version}?client=ID, docs/api.md "Play").
// The manager plays it at 60 frames a second and sends every frame; this page sends
// the pad you hold whenever it changes, and draws the newest frame with the live view's
// stage (stage.js). The keys are shown and can be changed (kept in localStorage); a
// gamepad works as the browser's Gamepad API reports it (standard mapping). The pure
// parts (keys and gamepad to a pad, the socket's URL, the result line) are unit-tested
// (web/tests/unit/play.test.mjs).
import { addToken } from "./api.js";
import { $, el } from "./dom.js";
import { drawStage } from "./stage.js";

// What each key does, as KeyboardEvent.code names keys (the physical key, whatever
// the layout); changeable on the page.
export const DEFAULT_KEYS = {
  left: "ArrowLeft", right: "ArrowRight", up: "ArrowUp", down: "ArrowDown",
  a: "KeyJ", b: "KeyK", x: "Space", z: "KeyU", l: "KeyL", start: "Enter",
};
export const KEY_LABELS = {
  left: "stick left", right: "stick right", up: "stick up", down: "stick down",
  a: "A (attack)", b: "B (special)", x: "X (jump)", z: "Z (grab)", l: "L (shield)", start: "START",
};
const BUTTONS = ["a", "b", "x", "z", "l", "start"];

// ---------------------------------------------------------------- pure
// The pad the held keys (a Set of codes) make with `keys`: {stick: [x, y], buttons}.
export function padFromKeys(held, keys) {
  const on = (k) => (held.has(keys[k]) ? 1 : 0);
  return { stick: [on("right") - on("left"), on("up") - on("down")], buttons: BUTTONS.filter((b) => held.has(keys[b])) };
}

// The pad a gamepad holds (the standard mapping: left stick axes 0 and 1, y down;
// buttons 0 A, 1 B, 2 and 3 X and Y (both jump), 4 and 6 L, 5 and 7 R (shield), 9
// START); a stick inside the dead zone reads 0. null without a gamepad.
export function padFromGamepad(gp, deadZone = 0.25) {
  if (!gp) return null;
  const axis = (i) => { const v = gp.axes[i] || 0; return Math.abs(v) < deadZone ? 0 : Math.max(-1, Math.min(1, v)); };
  const down = (i) => !!(gp.buttons[i] && (gp.buttons[i].pressed || gp.buttons[i].value > 0.5));
  const buttons = [];
  if (down(0)) buttons.push("a");
  if (down(1)) buttons.push("b");
  if (down(2) || down(3)) buttons.push("x");
  if (down(4) || down(6) || down(5) || down(7)) buttons.push("l");
  if (down(9)) buttons.push("start");
  const up = -axis(1);
  return { stick: [axis(0), up === 0 ? 0 : up], buttons }; // y up, and 0 rather than -0
}

// Both pads held at once (a key and a gamepad): stick axes added and clamped, buttons joined.
export function mergePads(a, b) {
  if (!b) return a;
  const clamp = (v) => Math.max(-1, Math.min(1, v));
  return { stick: [clamp(a.stick[0] + b.stick[0]), clamp(a.stick[1] + b.stick[1])], buttons: [...new Set([...a.buttons, ...b.buttons])].sort() };
}

export const samePad = (a, b) => !!a && !!b && a.stick[0] === b.stick[0] && a.stick[1] === b.stick[1] && a.buttons.join() === b.buttons.join();

// The play WebSocket for model `version` of the run at `prefix` (relative, "api/v1" or
// "api/v1/runs/NAME"), next to the page at `loc`, for browser `client`, with the token.
export function playSocketUrl(loc, prefix, version, client, token) {
  const proto = loc.protocol === "https:" ? "wss:" : "ws:";
  const base = loc.pathname.replace(/[^/]*$/, "");
  return addToken(proto + "//" + loc.host + base + prefix + "/play/" + version + "?client=" + encodeURIComponent(client), token);
}

// A match's length in words: whole minutes as minutes, else seconds.
export const matchLength = (secs) => (secs >= 60 && secs % 60 === 0 ? secs / 60 + (secs === 60 ? " minute" : " minutes") : Math.round(secs) + " s");

// The result line of a finished match (the manager's `result`).
export function resultLine(r) {
  const who = r.winner === "you" ? "You won" : r.winner === "bot" ? "The bot won" : "A draw";
  const why = { stocks: "", time: " on time", idle: " (a minute without input)", closed: " (stopped)" }[r.ending] || "";
  return who + why + ": stocks you " + r.your_stocks + ", bot " + r.bot_stocks + "; damage dealt you " +
    Math.round(r.your_damage_dealt) + " %, bot " + Math.round(r.bot_damage_dealt) + " % (" + (r.frames / 60).toFixed(1) + " s)";
}

// ---------------------------------------------------------------- state
// Read by the browser test as window.shinePlay: the match's messages.
export const play = { ws: null, hello: null, frames: [], result: null, refused: null, sent: null, keys: loadKeys(), held: new Set(), rebinding: null };

function loadKeys() {
  try { return { ...DEFAULT_KEYS, ...JSON.parse(localStorage.getItem("shine.keys") || "{}") }; }
  catch (e) { return { ...DEFAULT_KEYS }; }
}

// This tab's own id: one match at a time each.
function clientId() {
  let id = sessionStorage.getItem("shine.client");
  if (!id) { id = "tab-" + Math.random().toString(36).slice(2, 12); sessionStorage.setItem("shine.client", id); }
  return id;
}

// ---------------------------------------------------------------- DOM
// Start a match against `version` of the run at `prefix` (its label shown).
export function startPlay(prefix, version, label, token) {
  if (play.ws && play.ws.readyState <= 1) {
    $("play-status").textContent = "A match is on: finish it, or stop it, first.";
    $("play").scrollIntoView();
    return;
  }
  Object.assign(play, { hello: null, frames: [], result: null, refused: null, sent: null });
  $("play-result").textContent = "";
  $("play-status").textContent = "Starting a match against " + label + "…";
  $("play").hidden = false;
  $("play").scrollIntoView();
  const ws = new WebSocket(playSocketUrl(location, prefix, version, clientId(), token));
  play.ws = ws;
  ws.onmessage = (ev) => {
    const m = JSON.parse(ev.data);
    if (m.type === "hello") {
      play.hello = m;
      $("play-status").textContent = "Playing " + label + " (" + m.bot_side + "): you are " + m.your_side + ". " + m.stocks + " stocks, " +
        matchLength(m.match_secs) + "; the match ends after " + matchLength(m.idle_secs) + " without input.";
      $("play-stop").disabled = false;
      sendPad(true);
    } else if (m.type === "frame") {
      play.frames.push(m.frame);
    } else if (m.type === "result") {
      play.result = m.result;
      $("play-result").textContent = resultLine(m.result) + (m.league ? " · counted in the league: you (human) " + Math.round(m.league.you.rating) : "");
    } else if (m.type === "refused") {
      play.refused = m.error;
      $("play-status").textContent = m.error.message;
    } else if (m.type === "error") {
      $("play-status").textContent = m.error.message;
    }
  };
  ws.onclose = () => {
    $("play-stop").disabled = true;
    if (!play.hello && !play.refused) $("play-status").textContent = "The manager would not start a match (is the page's token right?).";
    else if (play.hello) $("play-status").textContent = "Match over. Press Play beside a bot to play again.";
  };
}

// Send the pad held now, if it changed (or `force`).
function sendPad(force) {
  if (!play.ws || play.ws.readyState !== 1 || !play.hello || play.result) return;
  const gp = typeof navigator !== "undefined" && navigator.getGamepads ? [...navigator.getGamepads()].find((g) => g) : null;
  const pad = mergePads(padFromKeys(play.held, play.keys), padFromGamepad(gp));
  if (!force && samePad(pad, play.sent)) return;
  play.sent = pad;
  play.ws.send(JSON.stringify(pad));
}

function renderKeys() {
  const tbody = $("play-keys").tBodies[0];
  tbody.innerHTML = "";
  for (const k of Object.keys(DEFAULT_KEYS)) {
    const b = el("button", "btn", play.rebinding === k ? "press a key…" : "change");
    b.addEventListener("click", () => { play.rebinding = k; renderKeys(); });
    const tr = el("tr");
    tr.dataset.key = k;
    const key = el("td");
    key.append(el("kbd", null, play.keys[k]));
    const change = el("td");
    change.append(b);
    tr.append(el("td", null, KEY_LABELS[k]), key, change);
    tbody.append(tr);
  }
}

const playing = () => play.ws && play.ws.readyState === 1 && play.hello && !play.result;

export function initPlay() {
  renderKeys();
  window.addEventListener("keydown", (e) => {
    if (play.rebinding) {
      play.keys[play.rebinding] = e.code;
      localStorage.setItem("shine.keys", JSON.stringify(play.keys));
      play.rebinding = null;
      renderKeys();
      e.preventDefault();
      return;
    }
    if (!playing() || !Object.values(play.keys).includes(e.code)) return;
    e.preventDefault(); // arrows and space would scroll the page
    play.held.add(e.code);
    sendPad(false);
  });
  window.addEventListener("keyup", (e) => {
    if (!play.held.delete(e.code)) return;
    sendPad(false);
  });
  window.addEventListener("blur", () => { play.held.clear(); sendPad(false); });
  $("play-stop").addEventListener("click", () => { if (play.ws) play.ws.close(); });
  $("play-reset-keys").addEventListener("click", () => {
    play.keys = { ...DEFAULT_KEYS };
    localStorage.removeItem("shine.keys");
    renderKeys();
  });
}

// Each animation frame: the gamepad polled (it has no events for its sticks), the
// newest frame drawn.
export function playTick() {
  if (playing()) sendPad(false);
  if (!$("play").hidden) {
    const f = play.frames.length ? play.frames[play.frames.length - 1] : null;
    drawStage($("play-stage"), f, !!play.hello, {
      agent: "BOT", agentPanel: "BOT (" + (play.hello ? play.hello.bot_side : "") + ")",
      opponent: "YOU", opponentPanel: "YOU (" + (play.hello ? play.hello.your_side : "") + ")",
      idle: "Press Play beside a bot to start",
    });
  }
}
