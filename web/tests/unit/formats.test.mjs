// Unit tests of web/formats.js: node --test web/tests/unit/
// The wall clock is read in UTC here, whatever the machine's zone.
process.env.TZ = "UTC";
import { test } from "node:test";
import assert from "node:assert/strict";
import { clock, fmtAgo, fmtBytes, fmtEpsilon, fmtInt, fmtNum, fmtPct, fmtSetting, matchClock, pad2 } from "../../formats.js";

test("fmtNum: no value is a dash, whatever kind of missing", () => {
  for (const v of [null, undefined, NaN, Infinity, -Infinity]) assert.equal(fmtNum(v), "–", String(v));
});

test("fmtNum: zero, both signs, is a bare 0 (not 0.00)", () => {
  assert.equal(fmtNum(0), "0");
  assert.equal(fmtNum(-0), "0");
});

test("fmtNum: small values keep three significant digits, or as many as asked", () => {
  assert.equal(fmtNum(1), "1.00");
  assert.equal(fmtNum(0.5), "0.500");
  assert.equal(fmtNum(-0.001234), "-0.00123");
  assert.equal(fmtNum(1e-7), "1.00e-7");
  assert.equal(fmtNum(0.123456, 5), "0.12346");
});

test("fmtNum: tens with one decimal, hundreds without", () => {
  assert.equal(fmtNum(10), "10.0");
  assert.equal(fmtNum(12.345), "12.3");
  assert.equal(fmtNum(-12.345), "-12.3");
  assert.equal(fmtNum(100), "100");
  assert.equal(fmtNum(123.4), "123");
  assert.equal(fmtNum(9999), "9999");
});

test("fmtNum: thousands from 10,000, millions, billions, negatives too", () => {
  assert.equal(fmtNum(10000), "10.0k");
  assert.equal(fmtNum(12345), "12.3k");
  assert.equal(fmtNum(-12345), "-12.3k");
  assert.equal(fmtNum(1e6), "1.00M");
  assert.equal(fmtNum(-2.5e6), "-2.50M");
  assert.equal(fmtNum(2.5e9), "2.50G");
});

test("fmtNum: at a unit's top end it rounds up without switching unit", () => {
  // 999,999 is under 1e6, so it stays in k: 1000.0k, not 1.00M.
  assert.equal(fmtNum(999999), "1000.0k");
  assert.equal(fmtNum(99.96), "100.0");
});

test("fmtNum: huge values stay in G (no T)", () => {
  assert.equal(fmtNum(1e21), "1000000000000.00G");
});

test("fmtInt: thousands separators, rounded, negatives", () => {
  assert.equal(fmtInt(0), "0");
  assert.equal(fmtInt(1234567), "1,234,567");
  assert.equal(fmtInt(2.5), "3");
  assert.equal(fmtInt(-1234.5), "-1,234"); // Math.round goes up at .5, also below zero
  assert.equal(fmtInt(1e21), "1,000,000,000,000,000,000,000");
});

test("fmtInt: null and undefined are a dash; NaN is not caught", () => {
  assert.equal(fmtInt(null), "–");
  assert.equal(fmtInt(undefined), "–");
  assert.equal(fmtInt(NaN), "NaN");
});

test("fmtPct: a share as a percentage with one decimal", () => {
  assert.equal(fmtPct(0), "0.0");
  assert.equal(fmtPct(1), "100.0");
  assert.equal(fmtPct(0.12345), "12.3");
  assert.equal(fmtPct(0.935), "93.5");
  assert.equal(fmtPct(-0.5), "-50.0");
  assert.equal(fmtPct(null), "–");
  assert.equal(fmtPct(undefined), "–");
});

test("fmtAgo: never, just now, seconds, minutes, hours", () => {
  assert.equal(fmtAgo(null), "never");
  assert.equal(fmtAgo(undefined), "never");
  assert.equal(fmtAgo(0), "just now");
  assert.equal(fmtAgo(0.999), "just now");
  assert.equal(fmtAgo(-5), "just now"); // a clock a little ahead
  assert.equal(fmtAgo(1), "1 s ago");
  assert.equal(fmtAgo(59.4), "59 s ago");
  assert.equal(fmtAgo(60), "1 min ago");
  assert.equal(fmtAgo(90), "2 min ago");
  assert.equal(fmtAgo(3599), "60 min ago");
  assert.equal(fmtAgo(3600), "1.0 h ago");
  assert.equal(fmtAgo(3 * 86400), "72.0 h ago");
});

test("fmtAgo: rounding at a unit's top end shows 60 of it", () => {
  assert.equal(fmtAgo(59.5), "60 s ago");
});

test("fmtBytes: bytes, KiB (no decimals), MiB (one)", () => {
  assert.equal(fmtBytes(0), "0 B");
  assert.equal(fmtBytes(1023), "1023 B");
  assert.equal(fmtBytes(1024), "1 KiB");
  assert.equal(fmtBytes(1536), "2 KiB");
  assert.equal(fmtBytes(1048575), "1024 KiB");
  assert.equal(fmtBytes(1048576), "1.0 MiB");
  assert.equal(fmtBytes(5e9), "4768.4 MiB");
});

test("fmtEpsilon: three decimals from 0.01, exponent notation below", () => {
  assert.equal(fmtEpsilon(1), "1.000");
  assert.equal(fmtEpsilon(0.4), "0.400");
  assert.equal(fmtEpsilon(0.01), "0.010");
  assert.equal(fmtEpsilon(0.00999), "1.0e-2");
  assert.equal(fmtEpsilon(0.001), "1.0e-3");
  assert.equal(fmtEpsilon(0), "0.0e+0");
});

test("fmtSetting: missing, lists, scalars", () => {
  assert.equal(fmtSetting(null), "–");
  assert.equal(fmtSetting(undefined), "–");
  assert.equal(fmtSetting([]), "");
  assert.equal(fmtSetting([1, 2, 3]), "1, 2, 3");
  assert.equal(fmtSetting(0), "0");
  assert.equal(fmtSetting(false), "false");
  assert.equal(fmtSetting("fight"), "fight");
  assert.equal(fmtSetting(2.5e-4), "0.00025");
});

test("pad2: two digits at least", () => {
  assert.equal(pad2(0), "00");
  assert.equal(pad2(7), "07");
  assert.equal(pad2(12), "12");
  assert.equal(pad2(123), "123");
});

test("clock: unix seconds as HH:MM:SS (here in UTC), fractions cut", () => {
  assert.equal(clock(0), "00:00:00");
  assert.equal(clock(3661), "01:01:01");
  assert.equal(clock(86399), "23:59:59");
  assert.equal(clock(1.9), "00:00:01");
  assert.equal(clock(-1), "23:59:59");
  assert.equal(clock(1700000000), "22:13:20");
});

test("matchClock: frames at 60 per second as M:SS", () => {
  assert.equal(matchClock(0), "0:00");
  assert.equal(matchClock(59), "0:00");
  assert.equal(matchClock(60), "0:01");
  assert.equal(matchClock(3599), "0:59");
  assert.equal(matchClock(3600), "1:00");
  assert.equal(matchClock(8 * 3600 + 15 * 60), "8:15");
  assert.equal(matchClock(36000), "10:00");
});
