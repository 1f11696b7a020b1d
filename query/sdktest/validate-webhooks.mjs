// Checks captured webhook deliveries with the official SDK's validateWebhook:
// the signature (the SDK's reading: HMAC-SHA256 keyed with the secret's UTF-8
// bytes, over the raw body, base64) and the payload schema
// (WebhookAddressActivityResponse, zod).
//
// Run by e2e TestWebhooksDevchain with:
//   MORAINE_SDKTEST_DELIVERIES  path of a JSON file [{url, headers, body}]
//   MORAINE_SDKTEST_SECRET      the account's shared secret
// Prints one line per failure and a closing "N passed, N failed" line.
import { readFileSync } from "node:fs";
import { Avalanche } from "@avalanche-sdk/chainkit";

const file = process.env.MORAINE_SDKTEST_DELIVERIES;
const secret = process.env.MORAINE_SDKTEST_SECRET;
if (!file || !secret) {
  console.error("MORAINE_SDKTEST_DELIVERIES and MORAINE_SDKTEST_SECRET are required");
  process.exit(2);
}
const sdk = new Avalanche({ enableTelemetry: false });
const deliveries = JSON.parse(readFileSync(file, "utf8"));
let passed = 0, failed = 0;
const kinds = {};
for (const d of deliveries) {
  try {
    const event = await sdk.validateWebhook({
      request: { url: d.url, method: "POST", headers: d.headers, body: d.body },
      secret,
    });
    passed++;
    const tx = event.event.transaction;
    if (tx.erc20Transfers.length) kinds.erc20 = true;
    if (tx.erc721Transfers.length) kinds.erc721 = true;
    if (tx.erc1155Transfers.length) kinds.erc1155 = true;
    if ((tx.internalTransactions ?? []).length > 1) kinds.internal = true;
    if ((event.event.logs ?? []).length) kinds.logs = true;
    if (tx.txStatus === "0") kinds.reverted = true;
    if (tx.networkToken) kinds.native = true;
  } catch (e) {
    failed++;
    console.log(`FAIL ${d.url}: ${e?.name}: ${String(e?.message ?? e).slice(0, 500)}`);
  }
}
console.log(`kinds ${JSON.stringify(kinds)}`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
