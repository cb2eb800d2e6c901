// Unit tests of web/api.js's token and URL handling.
import { test } from "node:test";
import assert from "node:assert/strict";
import { API, PARAMS, TOKEN, addToken, liveSocketUrl, relativePrefix } from "../../api.js";

test("without a page (node) there is no token and no ?run=", () => {
  assert.equal(TOKEN, null);
  assert.equal(PARAMS.get("run"), null);
  assert.equal(API, "api/v1");
});

test("addToken: nothing to add without a token", () => {
  for (const t of [null, undefined, ""]) assert.equal(addToken("api/v1/models/3", t), "api/v1/models/3");
});

test("addToken: ?token= or &token=, escaped", () => {
  assert.equal(addToken("api/v1/models/3", "abc"), "api/v1/models/3?token=abc");
  assert.equal(addToken("api/v1/stats?since=5", "abc"), "api/v1/stats?since=5&token=abc");
  assert.equal(addToken("x", "a b&c=d/é"), "x?token=a%20b%26c%3Dd%2F%C3%A9");
});

test("liveSocketUrl: ws: beside the page, wss: under https:", () => {
  assert.equal(liveSocketUrl({ protocol: "http:", host: "127.0.0.1:8080", pathname: "/" }, 3, null), "ws://127.0.0.1:8080/api/v1/live/3");
  assert.equal(liveSocketUrl({ protocol: "https:", host: "shine.example", pathname: "/" }, 3, null), "wss://shine.example/api/v1/live/3");
});

test("liveSocketUrl: under a path prefix, from the page's directory", () => {
  const loc = (pathname) => ({ protocol: "http:", host: "h", pathname });
  assert.equal(liveSocketUrl(loc("/shine/"), 0, null), "ws://h/shine/api/v1/live/0");
  assert.equal(liveSocketUrl(loc("/shine/index.html"), 12, null), "ws://h/shine/api/v1/live/12");
  assert.equal(liveSocketUrl(loc("/index.html"), 12, null), "ws://h/api/v1/live/12");
});

test("liveSocketUrl: the token as ?token= (a WebSocket carries no header)", () => {
  assert.equal(liveSocketUrl({ protocol: "http:", host: "h", pathname: "/" }, 7, "s3cret+"), "ws://h/api/v1/live/7?token=s3cret%2B");
});

test("relativePrefix: a run's routes relative to the page", () => {
  assert.equal(relativePrefix("/api/v1"), "api/v1");
  assert.equal(relativePrefix("/api/v1/runs/fight"), "api/v1/runs/fight");
  assert.equal(relativePrefix("api/v1"), "api/v1");
  assert.equal(relativePrefix("//x"), "/x", "only one slash goes");
});
