// Shared by the SDK contract scripts (contract.mjs, webhooks.mjs): checks that
// count failures instead of stopping, and the closing "N checks, N failures"
// line the Go tests read.
import * as errors from "@avalanche-sdk/chainkit/models/errors";

let checks = 0;
let failures = 0;

export function check(cond, what) {
  checks++;
  if (!cond) {
    failures++;
    console.log(`FAIL ${what}`);
  }
}

export function eq(got, want, what) {
  const g = JSON.stringify(got), w = JSON.stringify(want);
  check(g === w, `${what}: got ${g}, want ${w}`);
}

// step runs one named group of checks; an exception fails it with details.
export async function step(name, fn) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    failures++;
    console.log(`FAIL ${name}: ${e?.constructor?.name}: ${e?.message}\n${e?.stack ?? ""}`);
    if (e?.rawValue !== undefined) console.log("raw:", JSON.stringify(e.rawValue));
    if (e?.body !== undefined) console.log("body:", e.body);
  }
}

// expectError runs fn and checks it throws the SDK's typed error class with
// the status and the contract's error body (and, when given, its message).
export async function expectError(fn, cls, status, what, message) {
  try {
    await fn();
    check(false, `${what}: no error, want ${cls.name} ${status}`);
  } catch (e) {
    check(e instanceof cls, `${what}: got ${e?.constructor?.name} (${e?.message}), want ${cls.name}`);
    check(e instanceof errors.AvalancheError, `${what}: not an AvalancheError`);
    eq(e.statusCode, status, `${what} statusCode`);
    eq(e.data$?.statusCode, status, `${what} body statusCode`);
    check(typeof e.data$?.error === "string" && e.data$.error.length > 0, `${what}: body error`);
    check(typeof e.data$?.message === "string" || Array.isArray(e.data$?.message), `${what}: body message`);
    if (message !== undefined) eq(e.data$?.message, message, `${what} message`);
    return e;
  }
}

// pages collects every page of a paginated SDK call (a promise or its result).
export async function pages(res) {
  const out = [];
  for await (const page of await res) out.push(page.result);
  return out;
}

// finish prints the closing line and exits 1 if anything failed.
export function finish(label) {
  console.log(`${label}: ${checks} checks, ${failures} failures`);
  process.exit(failures === 0 ? 0 : 1);
}
