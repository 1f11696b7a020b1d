// NFT contract test: the official SDK's data.nfts.reindex (reindexNft)
// against a running moraine query server.
//
// Run by query/internal/app TestSDKReindexNft, which passes:
//   MORAINE_SDKTEST_URL      the server's base URL
//   MORAINE_SDKTEST_NFT      JSON: {chainId, address, tokenId} of an NFT never reindexed
import { Avalanche } from "@avalanche-sdk/chainkit";
import * as errors from "@avalanche-sdk/chainkit/models/errors";
import { check, eq, step, expectError, finish } from "./harness.mjs";

const url = process.env.MORAINE_SDKTEST_URL;
const nft = JSON.parse(process.env.MORAINE_SDKTEST_NFT);
if (!url || !nft) {
  console.error("MORAINE_SDKTEST_URL and MORAINE_SDKTEST_NFT are required");
  process.exit(2);
}

const sdk = new Avalanche({ serverURL: url, enableTelemetry: false, retryConfig: { strategy: "none" } });
const opts = { serverURL: url, retries: { strategy: "none" } };

await step("nfts.reindex", async () => {
  const res = await sdk.data.nfts.reindex({ chainId: nft.chainId, address: nft.address, tokenId: nft.tokenId }, opts);
  eq(res, undefined, "201, no body");
  // Once per hour per token: the second request within the hour is refused.
  const e = await expectError(() => sdk.data.nfts.reindex({ chainId: nft.chainId, address: nft.address.toLowerCase(), tokenId: nft.tokenId }, opts),
    errors.TooManyRequestsError, 429, "again within the hour");
  check(/once per hour/.test(e?.data$?.message ?? ""), `429 message says why: ${e?.data$?.message}`);
  check(Number(e?.headers?.get("retry-after")) > 3500, `Retry-After close to an hour: ${e?.headers?.get("retry-after")}`);
  // Another token of the same collection is not held back.
  await sdk.data.nfts.reindex({ chainId: nft.chainId, address: nft.address, tokenId: nft.tokenId + "1" }, opts);
});

await step("nfts.reindex errors", async () => {
  await expectError(() => sdk.data.nfts.reindex({ chainId: "999999", address: nft.address, tokenId: "1" }, opts),
    errors.NotFoundError, 404, "unknown chain", "Chain 999999 not found");
  await expectError(() => sdk.data.nfts.reindex({ chainId: nft.chainId, address: "0x1234", tokenId: "1" }, opts),
    errors.BadRequestError, 400, "bad address", ["Invalid address format"]);
  await expectError(() => sdk.data.nfts.reindex({ chainId: nft.chainId, address: nft.address, tokenId: "ten" }, opts),
    errors.BadRequestError, 400, "bad token id", ["tokenId must be a decimal number from 0 to 2^256-1"]);
});

finish("nfts");
