// Number, size and time formats for the dashboard's figures, tables and charts. Pure
// functions: no DOM, so node imports them too (web/tests/unit/formats.test.mjs).

// A figure in at most about four characters: 1.23G, 4.56M, 12.3k, 123, 12.3, 1.23.
// Anything that is not a finite number (null, undefined, NaN, ±Infinity) is "–".
export function fmtNum(v, digits = 3) {
  if (v === null || v === undefined || !isFinite(v)) return "–";
  const a = Math.abs(v);
  if (a >= 1e9) return (v / 1e9).toFixed(2) + "G";
  if (a >= 1e6) return (v / 1e6).toFixed(2) + "M";
  if (a >= 1e4) return (v / 1e3).toFixed(1) + "k";
  if (a >= 100) return v.toFixed(0);
  if (a >= 10) return v.toFixed(1);
  if (a === 0) return "0";
  return v.toPrecision(digits);
}

// A count with thousands separators: 1,234,567.
export const fmtInt = (v) => (v === null || v === undefined ? "–" : Math.round(v).toLocaleString("en-US"));

// A share (0..1) as a percentage with one decimal, without the sign: 0.5 -> "50.0".
export const fmtPct = (v) => (v === null || v === undefined ? "–" : (v * 100).toFixed(1));

// How long ago, from seconds: "just now", "12 s ago", "3 min ago", "1.5 h ago".
export function fmtAgo(secs) {
  if (secs === null || secs === undefined) return "never";
  if (secs < 1) return "just now";
  if (secs < 60) return Math.round(secs) + " s ago";
  if (secs < 3600) return Math.round(secs / 60) + " min ago";
  return (secs / 3600).toFixed(1) + " h ago";
}

// A file size: "512 B", "12 KiB", "3.4 MiB".
export function fmtBytes(b) {
  if (b >= 1 << 20) return (b / (1 << 20)).toFixed(1) + " MiB";
  if (b >= 1 << 10) return (b / (1 << 10)).toFixed(0) + " KiB";
  return b + " B";
}

// An exploration rate: three decimals, or one significant digit in exponent notation
// below 0.01 (0.001 -> "1.0e-3").
export const fmtEpsilon = (e) => (e < 0.01 ? e.toExponential(1) : e.toFixed(3));

// A run setting's value: lists joined with commas, missing ones as "–".
export function fmtSetting(v) {
  if (v === undefined || v === null) return "–";
  if (Array.isArray(v)) return v.join(", ");
  return String(v);
}

export const pad2 = (n) => String(n).padStart(2, "0");

// Unix seconds as the local wall-clock time, HH:MM:SS.
export const clock = (t) => {
  const d = new Date(t * 1000);
  return pad2(d.getHours()) + ":" + pad2(d.getMinutes()) + ":" + pad2(d.getSeconds());
};

// A game frame count (60 per second) as the match clock, M:SS.
export function matchClock(frame) {
  const secs = frame / 60;
  return Math.floor(secs / 60) + ":" + pad2(Math.floor(secs % 60));
}
