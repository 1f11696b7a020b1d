// Contract test of the Webhooks API: the official SDK (@avalanche-sdk/chainkit,
// pinned in package.json) calls every webhook, address and shared-secret
// method against a running moraine query server, with its response
// validation (zod) on, telemetry off and retries off, and checks that error
// cases come back as the SDK's typed errors with the right status.
//
// Run by the Go test TestSDKWebhooks (query/internal/app), which starts the
// server and passes:
//   MORAINE_SDKTEST_URL         the server's base URL
//   MORAINE_SDKTEST_KEY         API key of a fresh free-plan account
//   MORAINE_SDKTEST_OTHER_KEY   API key of a second account
//   MORAINE_SDKTEST_LIMITED_KEY API key of an account whose plan allows 30 CU per minute
//   MORAINE_SDKTEST_CHAIN       a chain id with webhooks and traces
//   MORAINE_SDKTEST_NO_TRACES   a chain id with webhooks but no traces
import { Avalanche } from "@avalanche-sdk/chainkit";
import * as errors from "@avalanche-sdk/chainkit/models/errors";
import { check, eq, step, expectError, pages, finish } from "./harness.mjs";

const env = (k) => {
  const v = process.env[k];
  if (!v) {
    console.error(`${k} is required`);
    process.exit(2);
  }
  return v;
};
const url = env("MORAINE_SDKTEST_URL");
const key = env("MORAINE_SDKTEST_KEY");
const otherKey = env("MORAINE_SDKTEST_OTHER_KEY");
const limitedKey = env("MORAINE_SDKTEST_LIMITED_KEY");
const chainId = env("MORAINE_SDKTEST_CHAIN");
const noTraces = env("MORAINE_SDKTEST_NO_TRACES");

const client = (apiKey) =>
  new Avalanche({ serverURL: url, apiKey, enableTelemetry: false, retryConfig: { strategy: "none" } });
const sdk = client(key);
// Each operation has its own server list in this SDK: the per-call
// serverURL is what aims it at moraine.
const opts = { serverURL: url, retries: { strategy: "none" } };

const a = [
  "0x9702230A8Ea53601f5cD2dc00fDBc13d4dF4A8c7",
  "0xB97EF9Ef8734C71904D8002F8b6Bc66Dd9c48a6E",
  "0x0000000000000000000000000000000000001001",
  "0x0000000000000000000000000000000000001002",
  "0x0000000000000000000000000000000000001003",
  "0x0000000000000000000000000000000000001004",
];
const transfer = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef";
let hook, hook2, secret;

await step("getSharedSecret before any: NotFoundError", async () => {
  await expectError(() => sdk.webhooks.getSharedSecret(opts), errors.NotFoundError, 404, "getSharedSecret");
});

await step("generateOrRotateSharedSecret, getSharedSecret", async () => {
  const s = await sdk.webhooks.generateOrRotateSharedSecret(opts);
  check(/^[0-9a-f]{64}$/.test(s.secret), `secret format ${s.secret}`);
  secret = s.secret;
  eq((await sdk.webhooks.getSharedSecret(opts)).secret, secret, "getSharedSecret");
  const r = await sdk.webhooks.generateOrRotateSharedSecret(opts);
  check(r.secret !== secret, "rotation changes the secret");
  secret = r.secret;
  eq((await sdk.webhooks.getSharedSecret(opts)).secret, secret, "getSharedSecret after rotation");
});

await step("create", async () => {
  hook = await sdk.webhooks.create({
    eventType: "address_activity", url: "https://example.com/hook", chainId,
    metadata: { addresses: [a[0], a[1]] }, name: "Tokens", description: "Track tokens", includeLogs: true,
  }, opts);
  check(/^[0-9a-f-]{36}$/.test(hook.id), `id ${hook.id}`);
  eq(hook.eventType, "address_activity", "eventType");
  eq(hook.chainId, chainId, "chainId");
  eq(hook.status, "active", "status");
  eq(hook.metadata.addresses, [a[0], a[1]], "addresses as given");
  eq(hook.metadata.eventSignatures, undefined, "eventSignatures omitted");
  eq([hook.name, hook.description, hook.includeLogs, hook.includeInternalTxs], ["Tokens", "Track tokens", true, false], "fields");
  check(Math.abs(hook.createdAt - Date.now()) < 120000, `createdAt ${hook.createdAt} in ms`);
  hook2 = await sdk.webhooks.create({
    eventType: "address_activity", url: "http://example.org/other", chainId,
    metadata: { addresses: [a[2]], eventSignatures: [transfer] },
  }, opts);
  eq([hook2.name, hook2.description], ["", ""], "name and description default to empty");
  eq(hook2.metadata.eventSignatures, [transfer], "eventSignatures");
});

await step("get", async () => {
  const g = await sdk.webhooks.get({ id: hook.id }, opts);
  eq(g, hook, "get returns what create returned");
});

await step("list (paged, status filter)", async () => {
  const ps = await pages(sdk.webhooks.list({ pageSize: 1 }, opts));
  eq(ps.map((p) => p.webhooks.map((w) => w.id)).flat(), [hook2.id, hook.id], "newest first over pages");
  eq(ps.length, 2, "one webhook per page");
  const inactive = await pages(sdk.webhooks.list({ status: "inactive" }, opts));
  eq(inactive[0].webhooks, [], "no inactive webhook yet");
});

await step("update", async () => {
  const u = await sdk.webhooks.update({
    id: hook.id, updateWebhookRequest: { name: "renamed", url: "https://example.com/v2", includeInternalTxs: true },
  }, opts);
  eq([u.name, u.url, u.includeInternalTxs, u.description], ["renamed", "https://example.com/v2", true, "Track tokens"], "updated");
});

await step("addresses.add, addresses.list, addresses.remove", async () => {
  const added = await sdk.webhooks.addresses.add({ id: hook.id, addressesChangeRequest: { addresses: [a[2], a[3], a[4], a[0].toLowerCase()] } }, opts);
  eq(added.metadata.addresses.length, 5, "five addresses");
  check(added.metadata.addresses.includes(a[0]), "first spelling kept");
  const ps = await pages(sdk.webhooks.addresses.list({ id: hook.id, pageSize: 2 }, opts));
  eq(ps.length, 3, "pages of two");
  eq(ps.map((p) => p.totalAddresses), [5, 5, 5], "totalAddresses");
  eq(ps.map((p) => p.addresses).flat().sort(), [a[0], a[1], a[2], a[3], a[4]].sort(), "every address listed once");
  const removed = await sdk.webhooks.addresses.remove({ id: hook.id, addressesChangeRequest: { addresses: [a[0], a[5]] } }, opts);
  eq(removed.metadata.addresses.length, 4, "removed one, the absent one is a no-op");
  check(!removed.metadata.addresses.includes(a[0]), "removed");
});

await step("deactivate, reactivate", async () => {
  const d = await sdk.webhooks.deactivate({ id: hook.id }, opts);
  eq(d.status, "inactive", "deactivate");
  const inactive = await pages(sdk.webhooks.list({ status: "inactive" }, opts));
  eq(inactive[0].webhooks.map((w) => w.id), [hook.id], "listed as inactive");
  const r = await sdk.webhooks.update({ id: hook.id, updateWebhookRequest: { status: "active" } }, opts);
  eq(r.status, "active", "reactivated");
});

await step("errors: ForbiddenError for the sixth address on a free webhook", async () => {
  await sdk.webhooks.addresses.add({ id: hook.id, addressesChangeRequest: { addresses: [a[0]] } }, opts);
  await expectError(
    () => sdk.webhooks.addresses.add({ id: hook.id, addressesChangeRequest: { addresses: [a[5]] } }, opts),
    errors.ForbiddenError, 403, "sixth address");
});

await step("errors: BadRequestError for invalid input", async () => {
  await expectError(() => sdk.webhooks.create({
    eventType: "address_activity", url: "https://example.com/hook", chainId, metadata: { addresses: ["0x123"] },
  }, opts), errors.BadRequestError, 400, "bad address", ["Invalid address format"]);
  await expectError(() => sdk.webhooks.create({
    eventType: "address_activity", url: "not a url", chainId, metadata: { addresses: [a[0]] },
  }, opts), errors.BadRequestError, 400, "bad url", ["url must be an absolute http or https URL"]);
  await expectError(() => sdk.webhooks.create({
    eventType: "address_activity", url: "https://example.com/hook", chainId: "999999999", metadata: { addresses: [a[0]] },
  }, opts), errors.BadRequestError, 400, "unknown chain");
  await expectError(() => sdk.webhooks.create({
    eventType: "address_activity", url: "https://example.com/hook", chainId: noTraces, includeInternalTxs: true,
    metadata: { addresses: [a[0]] },
  }, opts), errors.BadRequestError, 400, "internal txs without traces");
  await expectError(() => sdk.webhooks.create({
    eventType: "address_activity", url: "https://example.com/hook", chainId,
    metadata: { addresses: [a[0]], eventSignatures: ["0x12"] },
  }, opts), errors.BadRequestError, 400, "bad event signature", ["Invalid event signature format"]);
  await expectError(() => sdk.webhooks.update({ id: hook.id, updateWebhookRequest: { url: "ftp://x" } }, opts),
    errors.BadRequestError, 400, "update bad url");
  await expectError(() => sdk.webhooks.list({ pageSize: 101 }, opts), errors.BadRequestError, 400, "pageSize 101",
    ["pageSize must not be greater than 100"]);
});

await step("errors: NotFoundError for unknown and foreign webhooks", async () => {
  await expectError(() => sdk.webhooks.get({ id: "00000000-0000-4000-8000-000000000000" }, opts), errors.NotFoundError, 404, "unknown id");
  const other = client(otherKey);
  await expectError(() => other.webhooks.get({ id: hook.id }, opts), errors.NotFoundError, 404, "foreign get");
  await expectError(() => other.webhooks.update({ id: hook.id, updateWebhookRequest: { name: "x" } }, opts), errors.NotFoundError, 404, "foreign update");
  await expectError(() => other.webhooks.deactivate({ id: hook.id }, opts), errors.NotFoundError, 404, "foreign deactivate");
  await expectError(() => pages(other.webhooks.addresses.list({ id: hook.id }, opts)), errors.NotFoundError, 404, "foreign addresses.list");
  await expectError(() => other.webhooks.addresses.add({ id: hook.id, addressesChangeRequest: { addresses: [a[5]] } }, opts), errors.NotFoundError, 404, "foreign addresses.add");
  await expectError(() => other.webhooks.addresses.remove({ id: hook.id, addressesChangeRequest: { addresses: [a[1]] } }, opts), errors.NotFoundError, 404, "foreign addresses.remove");
  await expectError(() => other.webhooks.getSharedSecret(opts), errors.NotFoundError, 404, "foreign secret");
  eq((await pages(other.webhooks.list({}, opts)))[0].webhooks, [], "another account lists nothing");
  eq((await sdk.webhooks.get({ id: hook.id }, opts)).name, "renamed", "untouched by the other account");
});

await step("errors: UnauthorizedError without or with a bad key", async () => {
  const anon = new Avalanche({ serverURL: url, enableTelemetry: false, retryConfig: { strategy: "none" } });
  await expectError(() => anon.webhooks.get({ id: hook.id }, opts), errors.UnauthorizedError, 401, "no key", "Unauthorized");
  await expectError(() => anon.webhooks.generateOrRotateSharedSecret(opts), errors.UnauthorizedError, 401, "no key secret");
  await expectError(() => client("mk_" + "0".repeat(64)).webhooks.list({}, opts).then(pages), errors.UnauthorizedError, 401, "unknown key");
});

await step("errors: TooManyRequestsError past the budget", async () => {
  const limited = client(limitedKey);
  // 30 CU per minute: three getSharedSecret calls (10 CU each), then 429.
  let err;
  for (let i = 0; i < 10 && !err; i++) {
    try {
      await limited.webhooks.getSharedSecret(opts);
    } catch (e) {
      if (!(e instanceof errors.NotFoundError)) err = e;
    }
  }
  check(err instanceof errors.TooManyRequestsError, `got ${err?.constructor?.name}: ${err?.message}`);
  eq(err?.statusCode, 429, "429");
  const retryAfter = Number(err?.headers?.get("retry-after"));
  check(retryAfter >= 1 && retryAfter <= 60, `retry-after ${retryAfter}`);
});

finish("sdk webhooks");
