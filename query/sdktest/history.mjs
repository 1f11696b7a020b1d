// Contract test: the official Avalanche Data API SDK (@avalanche-sdk/chainkit,
// pinned in package.json) drives every EVM transaction, address-history and
// contract method against a running moraine fed by the development chain.
//
// Run by e2e TestHistoryDevchain, which passes:
//   MORAINE_SDKTEST_URL      the query service's base URL
//   MORAINE_SDKTEST_FIXTURE  JSON: addresses, tokens, a transaction and a
//                            contract of the indexed chain, and what the
//                            node's own data says their lists hold
//
// The SDK validates every response with its zod schemas (its default), so a
// field of the wrong type, a null or a missing required field fails the
// call. Telemetry off (it would call an outside host), retries off; each
// operation has its own server list in this SDK, so the per-call serverURL
// is what aims it here.
import { Avalanche } from "@avalanche-sdk/chainkit";
import * as errors from "@avalanche-sdk/chainkit/models/errors";
import { check, eq, step, expectError, pages, finish } from "./harness.mjs";

const url = process.env.MORAINE_SDKTEST_URL;
const fx = JSON.parse(process.env.MORAINE_SDKTEST_FIXTURE ?? "null");
if (!url || !fx) {
  console.error("MORAINE_SDKTEST_URL and MORAINE_SDKTEST_FIXTURE are required");
  process.exit(2);
}

const sdk = new Avalanche({ serverURL: url, enableTelemetry: false, retryConfig: { strategy: "none" } });
const opts = { serverURL: url, retries: { strategy: "none" } };
const chainId = fx.chainId;
const lower = (s) => (s ?? "").toLowerCase();

// all collects every item of a paginated list method.
async function all(res, key) {
  return (await pages(res)).flatMap((p) => p[key]);
}

await step("address.transactions.list (paginated, both orders, block range)", async () => {
  const a = fx.busy;
  const txs = await all(sdk.data.evm.address.transactions.list({ chainId, address: a.address, pageSize: 25 }, opts), "transactions");
  eq(txs.length, a.transactions, "every transaction once");
  check(txs.every((t, i) => i === 0 || BigInt(t.nativeTransaction.blockNumber) <= BigInt(txs[i - 1].nativeTransaction.blockNumber)), "newest first");
  eq(txs.map((t) => t.nativeTransaction.txHash).slice(0, 5), a.firstHashes, "the newest transactions");
  const transfers = txs.reduce((n, t) => n + (t.erc20Transfers?.length ?? 0) + (t.erc721Transfers?.length ?? 0) + (t.erc1155Transfers?.length ?? 0), 0);
  eq(transfers, a.transfersAsParty, "transfers the address sent or received");
  eq(txs.reduce((n, t) => n + (t.internalTransactions?.length ?? 0), 0), a.internalsAsParty, "internal transactions it sent or received");
  const asc = await all(sdk.data.evm.address.transactions.list({ chainId, address: a.address, sortOrder: "asc",
    startBlock: a.rangeStart, endBlock: a.rangeEnd, pageSize: 10 }, opts), "transactions");
  eq(asc.length, a.inRange, "oldest first within [startBlock, endBlock)");
  check(asc.every((t, i) => i === 0 || BigInt(t.nativeTransaction.blockNumber) >= BigInt(asc[i - 1].nativeTransaction.blockNumber)), "oldest first");
});

await step("address.transactions.listNative", async () => {
  const txs = await all(sdk.data.evm.address.transactions.listNative({ chainId, address: fx.busy.address, pageSize: 50 }, opts), "transactions");
  eq(txs.length, fx.busy.native, "sent or received");
  check(txs.every((t) => [lower(t.from.address), lower(t.to.address)].includes(fx.busy.address)), "the address is from or to");
});

for (const [method, holder, key] of [["listErc20", fx.erc20Holder, "erc20Token"], ["listErc721", fx.erc721Holder, "erc721Token"],
  ["listErc1155", fx.erc1155Holder, "erc1155Token"]]) {
  await step(`address.transactions.${method}`, async () => {
    const items = await all(sdk.data.evm.address.transactions[method]({ chainId, address: holder.address, pageSize: 20 }, opts), "transactions");
    eq(items.length, holder.count, "every transfer once");
    check(items.every((x) => lower(x.from.address) === holder.address || lower(x.to.address) === holder.address), "the address is a party");
    check(items.every((x) => x[key] && x[key].address), `${key} present`);
    if (key === "erc20Token") {
      check(items.every((x) => typeof x.erc20Token.decimals === "number" && x.erc20Token.name.length > 0), "token metadata from the node");
    }
  });
}

await step("address.transactions.listInternal", async () => {
  const h = fx.internalParty;
  const items = await all(sdk.data.evm.address.transactions.listInternal({ chainId, address: h.address, pageSize: 20 }, opts), "transactions");
  eq(items.length, h.count, "every internal transaction once");
  eq(items.filter((x) => x.isReverted).length, h.reverted, "reverted ones");
  check(items.every((x) => ["CALL", "CALLCODE", "CREATE", "CREATE2", "CREATE3"].includes(x.internalTxType)), "listed types only");
});

await step("contracts.listTransfers", async () => {
  for (const tok of fx.tokens) {
    const items = await all(sdk.data.evm.contracts.listTransfers({ chainId, address: tok.address, pageSize: 30 }, opts), "transfers");
    eq(items.length, tok.transfers, `${tok.ercType} ${tok.address} transfers`);
  }
});

await step("transactions.get", async () => {
  for (const tx of fx.txs) {
    const got = await sdk.data.evm.transactions.get({ chainId, txHash: tx.hash }, opts);
    eq(got.nativeTransaction.txHash, tx.hash, "txHash");
    eq(got.nativeTransaction.txStatus, tx.status, "txStatus");
    eq([got.erc20Transfers.length, got.erc721Transfers.length, got.erc1155Transfers.length, got.internalTransactions.length],
      [tx.erc20, tx.erc721, tx.erc1155, tx.internal], `${tx.hash} transfers and internal transactions`);
    eq(got.networkTokenDetails.networkToken.symbol, "AVAX", "networkToken");
    check(got.nativeTransaction.input.startsWith("0x"), "input");
  }
  await expectError(() => sdk.data.evm.transactions.get({ chainId, txHash: "0x" + "ab".repeat(32) }, opts), errors.NotFoundError, 404, "unknown hash");
  await expectError(() => sdk.data.evm.transactions.get({ chainId, txHash: "0x1234" }, opts), errors.BadRequestError, 400, "malformed hash");
});

await step("transactions.listLatest and listLatestAllChains", async () => {
  const latest = await all(sdk.data.evm.transactions.listLatest({ chainId, pageSize: 100 }, opts), "transactions");
  eq(latest.length, fx.latest, "every transaction of the chain");
  const failed = await all(sdk.data.evm.transactions.listLatest({ chainId, status: "failed", pageSize: 100 }, opts), "transactions");
  eq(failed.length, fx.failed, "status=failed");
  check(failed.every((t) => t.txStatus === "0"), "only failed ones");
  const page = await sdk.data.evm.transactions.listLatestAllChains({ pageSize: 7 }, opts);
  eq(page.result.transactions.map((t) => t.txHash), latest.slice(0, 7).map((t) => t.txHash), "all chains (one chain here)");
  const dep = await sdk.data.evm.chains.listAllLatestTransactions({ pageSize: 7, status: "success" }, opts);
  check(dep.result.transactions.every((t) => t.txStatus === "1"), "deprecated twin, status=success");
});

await step("address.chains.list and chains.getAddressChains", async () => {
  const got = await sdk.data.evm.address.chains.list({ address: fx.busy.address }, opts);
  eq(got.indexedChains.map((c) => c.chainId), [chainId], "indexedChains");
  const dep = await sdk.data.evm.chains.getAddressChains({ address: fx.busy.address }, opts);
  eq(dep.indexedChains.map((c) => c.chainId), [chainId], "deprecated twin");
  const none = await sdk.data.evm.address.chains.list({ address: "0x" + "12".repeat(20) }, opts);
  eq(none.indexedChains, [], "an address without activity");
  await expectError(() => sdk.data.evm.address.chains.list({ address: "0x12" }, opts), errors.BadRequestError, 400, "bad address", ["Invalid address format"]);
});

await step("contracts.getMetadata", async () => {
  for (const c of fx.contracts) {
    const got = await sdk.data.evm.contracts.getMetadata({ chainId, address: c.address }, opts);
    eq(got.ercType, c.ercType, `${c.address} ercType`);
    eq(lower(got.address), c.address, "address");
    if (c.ercType === "ERC-20") eq(got.decimals, c.decimals, "decimals");
    if (c.deployTx) eq(got.deploymentDetails?.txHash, c.deployTx, "deploymentDetails.txHash");
  }
  await expectError(() => sdk.data.evm.contracts.getMetadata({ chainId, address: fx.busy.address }, opts), errors.NotFoundError, 404, "an account");
});

await step("contracts.getDeploymentTransaction and address.contracts.listDeployments", async () => {
  const c = fx.contracts.find((x) => x.deployTx);
  const tx = await sdk.data.evm.contracts.getDeploymentTransaction({ chainId, address: c.address, currency: "usd" }, opts);
  eq(tx.nativeTransaction.txHash, c.deployTx, "the creating transaction");
  const deployed = await all(sdk.data.evm.address.contracts.listDeployments({ chainId, address: fx.deployer.address, pageSize: 5 }, opts), "contracts");
  eq(deployed.length, fx.deployer.count, "every contract it created");
  check(deployed.every((x) => lower(x.deploymentDetails?.deployerAddress) === fx.deployer.address || lower(x.deploymentDetails?.deployerContractAddress) === fx.deployer.address), "deployed by it");
  await expectError(() => sdk.data.evm.contracts.getDeploymentTransaction({ chainId, address: fx.busy.address }, opts), errors.NotFoundError, 404, "no deployment");
});

finish("history");
