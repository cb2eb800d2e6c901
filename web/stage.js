// The live match's picture: the stage, the two fighters and the Melee-style percent and
// stock panels, drawn on <canvas> from one frame of the live stream (live.js). The
// geometry (the camera, the fixed stars, an off-camera fighter's marker, when the
// labels would overlap) is pure (web/tests/unit/stage.test.mjs).
import { setupCanvas } from "./dom.js";
import { matchClock } from "./formats.js";

// Final Destination as the simulator plays it (bridge/src/sim/physics.rs): main stage
// at y = 0, edges at x = ±85.57, blast zones at x = ±246, y = +188 / −140. The camera
// shows the stage and its surroundings; a fighter outside the view is marked at the edge.
export const VIEW = { x0: -150, x1: 150, y0: -62, y1: 107 };
export const EDGE = 85.57;

// ---------------------------------------------------------------- pure
// The camera on a w × h canvas: pixels per game unit (sx, sy) and game x, y to pixels
// (y up in the game, down on the canvas).
export function camera(w, h) {
  const sx = w / (VIEW.x1 - VIEW.x0), sy = h / (VIEW.y1 - VIEW.y0);
  return { sx, sy, X: (x) => (x - VIEW.x0) * sx, Y: (y) => h - (y - VIEW.y0) * sy };
}

// The 70 fixed "stars" in the upper 62 % of a w × h sky: a small LCG from one seed, so
// the same sky on every frame.
export function stars(w, h) {
  let seed = 12345;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  const out = [];
  for (let i = 0; i < 70; i++) { const x = rnd() * w, y = rnd() * h * 0.62; out.push([x, y]); }
  return out;
}

// Whether a fighter is dead (no action state, or one of Melee's dead states 0..0x0a):
// drawn faded.
export const isDead = (p) => p.action === null || (p.action !== undefined && p.action <= 0x0a);

// Where to mark a fighter at canvas point (px, py) when it is off a w × h canvas: the
// nearest point 14 px inside the edge and the angle towards it; null when on canvas.
export function offCamera(px, py, w, h) {
  if (!(px < 0 || px > w || py < 0 || py > h)) return null;
  const cx = Math.min(Math.max(px, 14), w - 14), cy = Math.min(Math.max(py, 14), h - 14);
  return { cx, cy, angle: Math.atan2(py - cy, px - cx) };
}

// How far up the CPU's label goes so that it never overlaps the bot's: 30 px when the
// two stand close together on the canvas, else 0.
export function cpuLabelLift(f, X, Y) {
  return Math.abs(X(f.opponent.x) - X(f.agent.x)) < 110 && Math.abs(Y(f.opponent.y) - Y(f.agent.y)) < 40 ? 30 : 0;
}

export const stocksText = (n) => n + (n === 1 ? " stock" : " stocks");

// ---------------------------------------------------------------- drawing
// Who the two sides are on the live view: the worker's bot and its CPU.
export const LIVE_NAMES = { agent: "BOT", agentPanel: "BOT (port 2)", opponent: "CPU", opponentPanel: "CPU (port 1)", idle: "Pick a worker above to watch its match" };

// The stage, and frame `f`'s fighters and panels; without a frame, a hint: `names.idle`
// (`watching` false) or wait for its frames. `names` says who the sides are (the live
// view's, or a match played in the browser's: play.js).
export function drawStage(canvas, f, watching, names = LIVE_NAMES) {
  const { ctx, w, h } = setupCanvas(canvas);
  const { sx, X, Y } = camera(w, h);
  const sky = ctx.createLinearGradient(0, 0, 0, h);
  sky.addColorStop(0, "#0b1424"); sky.addColorStop(1, "#1a1030");
  ctx.fillStyle = sky;
  ctx.fillRect(0, 0, w, h);
  // A few fixed stars for depth.
  ctx.fillStyle = "rgba(255,255,255,.3)";
  for (const [x, y] of stars(w, h)) ctx.fillRect(x, y, 1.4, 1.4);
  // The stage: a flat top, a tapered underside.
  ctx.fillStyle = "#2b3647";
  ctx.strokeStyle = "#7f93ad";
  ctx.lineWidth = 2;
  ctx.beginPath();
  ctx.moveTo(X(-EDGE), Y(0));
  ctx.lineTo(X(EDGE), Y(0));
  ctx.lineTo(X(EDGE - 8), Y(-10));
  ctx.lineTo(X(EDGE - 30), Y(-24));
  ctx.lineTo(X(-EDGE + 30), Y(-24));
  ctx.lineTo(X(-EDGE + 8), Y(-10));
  ctx.closePath();
  ctx.fill();
  ctx.stroke();
  ctx.strokeStyle = "#b9c7d8";
  ctx.beginPath(); ctx.moveTo(X(-EDGE), Y(0)); ctx.lineTo(X(EDGE), Y(0)); ctx.stroke();
  // Axis hints: ledges, scale.
  ctx.fillStyle = "#5b6676";
  ctx.font = "11px system-ui, sans-serif";
  ctx.textAlign = "center";
  ctx.fillText("x = −85.6", X(-EDGE), Y(-30));
  ctx.fillText("x = +85.6", X(EDGE), Y(-30));

  if (!f) {
    ctx.fillStyle = "#8b98a9";
    ctx.font = "16px system-ui, sans-serif";
    ctx.fillText(watching ? "Waiting for frames…" : names.idle, w / 2, h * 0.3);
    return;
  }
  drawFighter(ctx, X, Y, sx, f.opponent, "#ef5b5b", names.opponent, w, h, cpuLabelLift(f, X, Y));
  drawFighter(ctx, X, Y, sx, f.agent, "#4fb3ff", names.agent, w, h, 0);
  drawHud(ctx, w, h, f, names);
}

function drawFighter(ctx, X, Y, s, p, color, tag, w, h, lift) {
  const dead = isDead(p);
  const px = X(p.x), py = Y(p.y);
  const mark = offCamera(px, py, w, h);
  if (mark) {
    // Off camera: an arrow at the nearest edge, pointing at the fighter.
    ctx.save();
    ctx.translate(mark.cx, mark.cy); ctx.rotate(mark.angle);
    ctx.fillStyle = color;
    ctx.beginPath(); ctx.moveTo(10, 0); ctx.lineTo(-6, -7); ctx.lineTo(-6, 7); ctx.closePath(); ctx.fill();
    ctx.restore();
    return;
  }
  const bw = 7 * s, bh = 13 * s;
  ctx.save();
  ctx.globalAlpha = dead ? 0.35 : 1;
  // Shadow on the stage when above it.
  if (Math.abs(p.x) <= EDGE && p.y > 0) {
    ctx.fillStyle = "rgba(0,0,0,.35)";
    ctx.beginPath(); ctx.ellipse(px, Y(0), bw * 0.7, 2.5, 0, 0, Math.PI * 2); ctx.fill();
  }
  // Body: a rounded capsule standing on (x, y).
  ctx.fillStyle = color;
  ctx.strokeStyle = "rgba(255,255,255,.8)";
  ctx.lineWidth = 1.5;
  const r = bw / 2;
  ctx.beginPath();
  ctx.moveTo(px - r, py - r);
  ctx.arc(px, py - bh + r, r, Math.PI, 0);
  ctx.lineTo(px + r, py - r);
  ctx.arc(px, py - r, r, 0, Math.PI);
  ctx.closePath();
  ctx.fill(); ctx.stroke();
  // Facing: an eye and a nose on the side it faces.
  const dir = p.facing >= 0 ? 1 : -1;
  ctx.fillStyle = "#0d1117";
  ctx.beginPath(); ctx.arc(px + dir * r * 0.45, py - bh + r * 1.1, Math.max(1.5, r * 0.22), 0, Math.PI * 2); ctx.fill();
  ctx.fillStyle = color;
  ctx.beginPath();
  ctx.moveTo(px + dir * r * 0.9, py - bh + r * 1.3);
  ctx.lineTo(px + dir * (r + 6), py - bh + r * 1.6);
  ctx.lineTo(px + dir * r * 0.9, py - bh + r * 1.9);
  ctx.closePath(); ctx.fill();
  ctx.restore();
  // Label: who, and the action state.
  ctx.textAlign = "center";
  ctx.font = "600 12px system-ui, sans-serif";
  ctx.fillStyle = color;
  ctx.fillText(tag, px, py - bh - 20 - lift);
  ctx.font = "12px ui-monospace, monospace";
  ctx.fillStyle = "#d8dee6";
  ctx.fillText(p.action_name || "?", px, py - bh - 6 - lift);
}

function drawHud(ctx, w, h, f, names) {
  // Melee-style panels: percent and stocks, opponent left, bot right.
  const panels = [[f.opponent, names.opponentPanel, "#ef5b5b"], [f.agent, names.agentPanel, "#4fb3ff"]];
  panels.forEach(([p, name, color], i) => {
    const pw = 170, ph = 62, x = w / 2 + (i === 0 ? -pw - 16 : 16), y = h - ph - 12;
    ctx.fillStyle = "rgba(13,17,23,.78)";
    ctx.strokeStyle = color;
    ctx.lineWidth = 1.5;
    ctx.beginPath(); ctx.roundRect(x, y, pw, ph, 8); ctx.fill(); ctx.stroke();
    ctx.textAlign = "left";
    ctx.fillStyle = color;
    ctx.font = "600 11px system-ui, sans-serif";
    ctx.fillText(name, x + 10, y + 16);
    ctx.fillStyle = "#f2f5f8";
    ctx.font = "700 26px system-ui, sans-serif";
    ctx.fillText(Math.round(p.percent) + "%", x + 10, y + 48);
    for (let s = 0; s < p.stocks; s++) {
      ctx.fillStyle = color;
      ctx.beginPath(); ctx.arc(x + pw - 14 - s * 16, y + 44, 5.5, 0, Math.PI * 2); ctx.fill();
    }
    ctx.fillStyle = "#8b98a9";
    ctx.font = "11px system-ui, sans-serif";
    ctx.textAlign = "right";
    ctx.fillText(stocksText(p.stocks), x + pw - 10, y + 16);
  });
  ctx.textAlign = "left";
  ctx.fillStyle = "#8b98a9";
  ctx.font = "12px ui-monospace, monospace";
  ctx.fillText("frame " + f.frame, 12, 20);
  ctx.fillText(matchClock(f.frame), 12, 36);
}
