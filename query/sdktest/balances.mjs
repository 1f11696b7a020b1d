// Contract test: the official Avalanche Data API SDK (@avalanche-sdk/chainkit,
// pinned in package.json) drives every EVM balance and NFT method against a
// running moraine fed by the development chain.
//
// Run by e2e TestBalancesDevchain, which passes:
//   MORAINE_SDKTEST_URL      the query service's base URL
//   MORAINE_SDKTEST_FIXTURE  JSON: holders and what the node's balanceOf,
//                            ownerOf and eth_getBalance say they hold at a
//                            block, an NFT collection and an ERC-1155 token
//
// The SDK validates every response with its zod schemas (its default), so a
// field of the wrong type, a null where none is allowed or a missing
// required field fails the call. Telemetry and retries off; the per-call
// serverURL aims each operation here.
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
const balances = sdk.data.evm.address.balances;

async function all(res, key) {
  return (await pages(res)).flatMap((p) => p[key]);
}

const sortedEntries = (o) => Object.entries(o).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));

await step("address.balances.getNative (at a block)", async () => {
  const r = await balances.getNative({ chainId, address: fx.erc20.holder, blockNumber: fx.block, currency: "usd" }, opts);
  eq(r.nativeTokenBalance.balance, fx.erc20.native, "eth_getBalance at the block");
  eq(r.nativeTokenBalance.symbol, "AVAX", "the chain's native token");
  eq(r.nativeTokenBalance.chainId, chainId, "chainId");
  check(r.nativeTokenBalance.price === undefined, "no price");
});

await step("address.balances.listErc20 (paginated, at a block)", async () => {
  const pagesOf = await pages(balances.listErc20({ chainId, address: fx.erc20.holder, blockNumber: fx.block, pageSize: 1,
    filterSpamTokens: false, currency: "usd" }, opts));
  const items = pagesOf.flatMap((p) => p.erc20TokenBalances);
  const got = Object.fromEntries(items.map((b) => [lower(b.address), b.balance]));
  eq(sortedEntries(got), sortedEntries(fx.erc20.balances), "balanceOf of every token at the block");
  check(items.every((b) => b.ercType === "ERC-20" && b.tokenReputation === null && b.chainId === chainId), "ercType, tokenReputation, chainId");
  check(pagesOf.every((p) => p.nativeTokenBalance.balance === fx.erc20.native), "native balance on every page");
  const [one] = Object.keys(fx.erc20.balances);
  const only = await all(balances.listErc20({ chainId, address: fx.erc20.holder, blockNumber: fx.block, contractAddresses: one }, opts),
    "erc20TokenBalances");
  eq(only.map((b) => [lower(b.address), b.balance]), [[one, fx.erc20.balances[one]]], "contractAddresses");
});

await step("address.balances.listErc721 (paginated)", async () => {
  const items = await all(balances.listErc721({ chainId, address: fx.erc721.holder, pageSize: 2 }, opts), "erc721TokenBalances");
  // The SDK has no blockNumber here (moraine's extension): the head, where
  // the holder may have moved some since the fixture's block.
  check(items.length > 0, "the holder's NFTs");
  check(items.every((b) => b.ercType === "ERC-721" && lower(b.ownerAddress) === fx.erc721.holder && typeof b.metadata.indexStatus === "string"),
    "ercType, owner, metadata");
});

await step("address.balances.listErc1155 (at a block)", async () => {
  const items = await all(balances.listErc1155({ chainId, address: fx.erc1155.holder, blockNumber: fx.block, pageSize: 3 }, opts),
    "erc1155TokenBalances");
  const got = Object.fromEntries(items.map((b) => [`${lower(b.address)}#${b.tokenId}`, b.balance]));
  eq(sortedEntries(got), sortedEntries(fx.erc1155.balances), "balanceOf(id) at the block");
});

await step("address.balances.listCollectibles", async () => {
  const items = await all(balances.listCollectibles({ chainId, address: fx.erc1155.holder, pageSize: 4 }, opts), "collectibleBalances");
  check(items.length > 0 && items.every((b) => b.ercType === "ERC-721" || b.ercType === "ERC-1155"), "both kinds");
});

await step("nfts.list and nfts.get", async () => {
  const tokens = await all(sdk.data.nfts.list({ chainId, address: fx.nft.address, pageSize: 25 }, opts), "tokens");
  eq(tokens.length, fx.nft.ids, "every token id once");
  const items = await all(sdk.data.nfts.list({ chainId, address: fx.items.address, pageSize: 5 }, opts), "tokens");
  eq(items.length, fx.items.ids, "every ERC-1155 id once");
  check(items.every((t) => t.ercType === "ERC-1155"), "ERC-1155 tokens");
  const one = await sdk.data.nfts.get({ chainId, address: fx.nft.address, tokenId: fx.nft.tokenId }, opts);
  eq(one.ercType, "ERC-721", "ercType");
  eq(one.tokenId, fx.nft.tokenId, "tokenId");
  check(typeof one.ownerAddress === "string", "ownerAddress");
});

await step("errors", async () => {
  await expectError(() => balances.getNative({ chainId, address: "0x12" }, opts), errors.BadRequestError, 400, "bad address");
  await expectError(() => balances.listErc20({ chainId, address: fx.erc20.holder, blockNumber: "99999999999" }, opts),
    errors.BadRequestError, 400, "a block beyond the head");
  await expectError(() => sdk.data.nfts.get({ chainId, address: fx.nft.address, tokenId: "999999999999999999" }, opts),
    errors.NotFoundError, 404, "an NFT that does not exist");
  await expectError(() => balances.listErc1155({ chainId: "99", address: fx.erc20.holder }, opts), errors.NotFoundError, 404, "unknown chain");
});

finish("balances.mjs");
