// Contract test: the official Avalanche Data API SDK (@avalanche-sdk/chainkit,
// pinned in package.json) against a running moraine query server.
//
// Run by query/internal/app TestSDKContract, which starts the server on a free
// port over a test ClickHouse database and passes:
//   MORAINE_SDKTEST_URL      the server's base URL
//   MORAINE_SDKTEST_FIXTURE  JSON: what the database holds (see sdk_test.go)
//
// The SDK runs with its response validation (zod) on, which is its default,
// telemetry off (it would call an outside host) and retries off. Note: each
// operation has its own server list in this SDK, so the global `serverURL`
// option is ignored for it; the per-call option is what aims the SDK here.
import { Avalanche } from "@avalanche-sdk/chainkit";
import * as errors from "@avalanche-sdk/chainkit/models/errors";
import { check, eq, step, expectError, pages, finish } from "./harness.mjs";

const url = process.env.MORAINE_SDKTEST_URL;
const fx = JSON.parse(process.env.MORAINE_SDKTEST_FIXTURE);
if (!url || !fx) {
  console.error("MORAINE_SDKTEST_URL and MORAINE_SDKTEST_FIXTURE are required");
  process.exit(2);
}

const sdk = new Avalanche({ serverURL: url, enableTelemetry: false, retryConfig: { strategy: "none" } });
const opts = { serverURL: url, retries: { strategy: "none" } };

const [cchain, fuji, dev] = fx.chains;

await step("chains.list", async () => {
  const all = await sdk.data.evm.chains.list({}, opts);
  eq(all.chains.map((c) => c.chainId), [cchain.chainId, fuji.chainId, dev.chainId], "all chains");
  const c = all.chains[0];
  eq(c.status, "OK", "status");
  eq(c.platformChainId, cchain.blockchainId, "platformChainId");
  eq(c.vmName, "EVM", "vmName");
  eq(c.isTestnet, false, "isTestnet");
  eq(c.networkToken, { name: "Avalanche", symbol: "AVAX", decimals: 18 }, "networkToken");
  eq(c.enabledFeatures, ["webhooks"], "enabledFeatures");
  eq(typeof c.rpcUrl, "string", "rpcUrl");
  const main = await sdk.data.evm.chains.list({ network: "mainnet" }, opts);
  eq(main.chains.map((c) => c.chainId), [cchain.chainId], "network=mainnet");
  const test = await sdk.data.evm.chains.list({ network: "fuji" }, opts);
  eq(test.chains.map((c) => c.chainId), [fuji.chainId, dev.chainId], "network=fuji");
  const hooks = await sdk.data.evm.chains.list({ feature: "webhooks" }, opts);
  eq(hooks.chains.map((c) => c.chainId), [cchain.chainId], "feature=webhooks");
});

await step("chains.get", async () => {
  const byId = await sdk.data.evm.chains.get({ chainId: cchain.chainId }, opts);
  eq(byId.chainId, cchain.chainId, "by evm id");
  eq(byId.chainName, cchain.name, "chainName");
  const byBC = await sdk.data.evm.chains.get({ chainId: fuji.blockchainId }, opts);
  eq(byBC.chainId, fuji.chainId, "by blockchain id gives the decimal id");
  eq(byBC.isTestnet, true, "fuji isTestnet");
  await expectError(() => sdk.data.evm.chains.get({ chainId: "999999" }, opts), errors.NotFoundError, 404, "unknown chain");
  await expectError(() => sdk.data.evm.chains.get({ chainId: "no-such-chain!" }, opts), errors.BadRequestError, 400, "garbage chain");
});

function checkBlock(b, chainId, what) {
  eq(typeof b.blockNumber, "string", `${what} blockNumber type`);
  eq(typeof b.blockTimestamp, "number", `${what} blockTimestamp type`);
  eq(b.chainId, chainId, `${what} chainId`);
  check(/^0x[0-9a-f]{64}$/.test(b.blockHash), `${what} blockHash form`);
  check(/^0x[0-9a-f]{64}$/.test(b.parentHash), `${what} parentHash form`);
  for (const f of ["baseFee", "gasUsed", "gasLimit", "gasCost", "feesSpent", "cumulativeTransactions"]) {
    check(/^[0-9]+$/.test(b[f]), `${what} ${f} decimal string: ${b[f]}`);
  }
  eq(typeof b.txCount, "number", `${what} txCount type`);
}

await step("blocks.listLatest (paginated)", async () => {
  const ps = await pages(await sdk.data.evm.blocks.listLatest({ chainId: cchain.chainId, pageSize: 10 }, opts));
  eq(ps.length, Math.ceil(cchain.blocks.length / 10), "page count");
  check(ps.slice(0, -1).every((p) => typeof p.nextPageToken === "string"), "nextPageToken on all but the last page");
  eq(ps[ps.length - 1].nextPageToken, undefined, "no nextPageToken on the last page");
  const blocks = ps.flatMap((p) => p.blocks);
  eq(blocks.map((b) => b.blockNumber), cchain.blocks.map((b) => b.number), "every block once, newest first");
  eq(blocks.map((b) => b.blockHash), cchain.blocks.map((b) => b.hash), "hashes");
  blocks.forEach((b) => checkBlock(b, cchain.chainId, `block ${b.blockNumber}`));
  const granite = blocks.find((b) => b.blockNumber === cchain.granite.number);
  eq(granite.blockTimestampMilliseconds, cchain.granite.timestampMs, "blockTimestampMilliseconds");
  eq(granite.blockMinDelayExcess, cchain.granite.minDelayExcess, "blockMinDelayExcess");
  const older = blocks.find((b) => b.blockNumber !== cchain.granite.number);
  check(!("blockTimestampMilliseconds" in older) && !("blockMinDelayExcess" in older), "pre-Granite fields omitted");

  // By blockchain id, default page size.
  const first = await sdk.data.evm.blocks.listLatest({ chainId: cchain.blockchainId }, opts);
  eq(first.result.blocks.length, 10, "default pageSize 10");
  eq(first.result.blocks[0].chainId, cchain.chainId, "decimal chainId");

  // A chain with nothing indexed yet.
  const none = await sdk.data.evm.blocks.listLatest({ chainId: dev.chainId }, opts);
  eq(none.result.blocks, [], "empty chain");
  eq(none.result.nextPageToken, undefined, "empty chain has no token");

  await expectError(() => sdk.data.evm.blocks.listLatest({ chainId: "999999" }, opts), errors.NotFoundError, 404, "unknown chain");
  const e = await expectError(() => sdk.data.evm.blocks.listLatest({ chainId: cchain.chainId, pageSize: 101 }, opts),
    errors.BadRequestError, 400, "pageSize 101");
  eq(e?.data$?.message, ["pageSize must not be greater than 100"], "validation message");
  await expectError(() => sdk.data.evm.blocks.listLatest({ chainId: cchain.chainId, pageToken: "tampered" }, opts),
    errors.BadRequestError, 400, "bad pageToken");
});

await step("blocks.get", async () => {
  const want = cchain.blocks[3];
  const byNum = await sdk.data.evm.blocks.get({ chainId: cchain.chainId, blockId: want.number }, opts);
  eq(byNum.blockHash, want.hash, "by number");
  checkBlock(byNum, cchain.chainId, "get");
  const byHash = await sdk.data.evm.blocks.get({ chainId: cchain.blockchainId, blockId: want.hash.toUpperCase().replace("0X", "0x") }, opts);
  eq(byHash.blockNumber, want.number, "by hash (upper case)");
  const g = await sdk.data.evm.blocks.get({ chainId: cchain.chainId, blockId: cchain.granite.number }, opts);
  eq(g.blockTimestampMilliseconds, cchain.granite.timestampMs, "granite get");
  await expectError(() => sdk.data.evm.blocks.get({ chainId: cchain.chainId, blockId: "999999" }, opts), errors.NotFoundError, 404, "unknown block");
  await expectError(() => sdk.data.evm.blocks.get({ chainId: cchain.chainId, blockId: "0x" + "ab".repeat(32) }, opts), errors.NotFoundError, 404, "unknown hash");
  await expectError(() => sdk.data.evm.blocks.get({ chainId: cchain.chainId, blockId: "0x1a" }, opts), errors.BadRequestError, 400, "bad blockId");
  await expectError(() => sdk.data.evm.blocks.get({ chainId: "999999", blockId: "1" }, opts), errors.NotFoundError, 404, "unknown chain");
});

await step("blocks.listTransactions", async () => {
  const tb = cchain.txBlock;
  const res = await sdk.data.evm.blocks.listTransactions({ chainId: cchain.chainId, blockId: tb.number }, opts);
  eq(res.nextPageToken, undefined, "pageSize 0: no token");
  eq(res.transactions.map((t) => t.txHash), tb.txs.map((t) => t.hash), "all transactions by index");
  res.transactions.forEach((t, i) => {
    const w = tb.txs[i];
    eq(t.blockIndex, i, "blockIndex");
    eq(t.blockNumber, tb.number, "blockNumber");
    eq(t.chainId, cchain.chainId, "chainId");
    eq(t.from.address, w.from, "from checksummed");
    eq(t.to.address, w.to, "to checksummed (created contract for creations)");
    eq(t.method.callType, w.callType, "callType");
    eq(t.method.methodHash, w.methodHash, "methodHash");
    eq(t.txStatus, w.status, "txStatus");
    eq(typeof t.txType, "number", "txType type");
    for (const f of ["gasLimit", "gasUsed", "gasPrice", "nonce", "value"]) check(/^[0-9]+$/.test(t[f]), `tx ${f}`);
  });
  // A big block: all at once by default, or paged by hand.
  const big = cchain.bigBlock;
  const all = await sdk.data.evm.blocks.listTransactions({ chainId: cchain.chainId, blockId: big.hash }, opts);
  eq(all.transactions.length, big.txCount, "all txs of the big block");
  const p1 = await sdk.data.evm.blocks.listTransactions({ chainId: cchain.chainId, blockId: big.number, pageSize: 100 }, opts);
  eq(p1.transactions.length, 100, "first page");
  check(typeof p1.nextPageToken === "string", "token after the first page");
  const p2 = await sdk.data.evm.blocks.listTransactions({ chainId: cchain.chainId, blockId: big.number, pageSize: 100, pageToken: p1.nextPageToken }, opts);
  eq(p2.transactions.length, big.txCount - 100, "second page");
  eq(p2.transactions[0].blockIndex, 100, "second page starts after the first");
  eq(p2.nextPageToken, undefined, "no token on the last page");
  await expectError(() => sdk.data.evm.blocks.listTransactions({ chainId: cchain.chainId, blockId: "999999" }, opts), errors.NotFoundError, 404, "unknown block");
  await expectError(() => sdk.data.evm.blocks.listTransactions({ chainId: cchain.chainId, blockId: tb.number, pageSize: -1 }, opts), errors.BadRequestError, 400, "pageSize -1");
});

async function allChains(call, what) {
  const ps = await pages(await call({ pageSize: 10 }));
  const blocks = ps.flatMap((p) => p.blocks);
  eq(blocks.length, cchain.blocks.length + fuji.blocks.length, `${what}: every block of every chain`);
  const keys = new Set(blocks.map((b) => `${b.chainId}/${b.blockNumber}`));
  eq(keys.size, blocks.length, `${what}: no repeats`);
  check(blocks.every((b, i) => i === 0 || b.blockTimestamp <= blocks[i - 1].blockTimestamp), `${what}: blockTimestamp desc`);
  const fujiOnly = await call({ network: "fuji", pageSize: 100 });
  eq(fujiOnly.result.blocks.map((b) => b.blockNumber), fuji.blocks.map((b) => b.number), `${what}: network=fuji`);
  await expectError(() => call({ pageSize: 0 }), errors.BadRequestError, 400, `${what}: pageSize 0`);
}

await step("blocks.listLatestAllChains", () =>
  allChains((r) => sdk.data.evm.blocks.listLatestAllChains(r, opts), "listLatestAllChains"));
await step("chains.listAllLatestBlocks (deprecated)", () =>
  allChains((r) => sdk.data.evm.chains.listAllLatestBlocks(r, opts), "listAllLatestBlocks"));

finish("sdk contract");
