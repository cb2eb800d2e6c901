// The manager's API (docs/api.md) as the page uses it: JSON reads, and the token.
// With `public_reads = false` the page is opened as /?token=T: fetches send it as a
// bearer header; the WebSocket and download links (which cannot carry headers) as
// ?token=. The URL helpers are pure (web/tests/unit/api.test.mjs); `location` is only
// read when there is one, so node can import this module.

// Relative, so the page also works under a path prefix.
export const API = "api/v1";

// The page's own query: ?token= and ?run= (the run picked, see app.js).
export const PARAMS = new URLSearchParams(typeof location === "undefined" ? "" : location.search);
export const TOKEN = PARAMS.get("token");

// `url` with `token` appended as ?token= (or &token=); unchanged without a token.
export function addToken(url, token) {
  return token ? url + (url.includes("?") ? "&" : "?") + "token=" + encodeURIComponent(token) : url;
}

// `url` with the page's token, if it was opened with one.
export const withToken = (url) => addToken(url, TOKEN);

// The live match WebSocket of worker `id`, next to the page at `loc` (a Location, or
// anything with protocol, host and pathname): wss: under https:, the page's directory
// as the base, and the token as ?token=.
export function liveSocketUrl(loc, id, token) {
  const proto = loc.protocol === "https:" ? "wss:" : "ws:";
  const base = loc.pathname.replace(/[^/]*$/, "");
  return addToken(proto + "//" + loc.host + base + API + "/live/" + id, token);
}

// A run's route prefix as GET /api/v1/runs gives it ("/api/v1", "/api/v1/runs/fight"),
// relative like API.
export const relativePrefix = (prefix) => prefix.replace(/^\//, "");

export async function getJSON(path) {
  const r = await fetch(path, { headers: TOKEN ? { Authorization: "Bearer " + TOKEN } : {}, cache: "no-store" });
  if (!r.ok) throw new Error(path + ": HTTP " + r.status);
  return r.json();
}
