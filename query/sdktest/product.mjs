// Contract test of the API's product routes: usage metrics and request logs
// (getApiUsageMetrics, getApiLogs), the health checks, and transaction
// export jobs (postTransactionExportJob, getOperationResult, the file). The official SDK
// (@avalanche-sdk/chainkit, pinned in package.json) calls them against a
// running moraine query server with its response validation (zod) on,
// telemetry off and retries off.
//
// Run by the Go test TestSDKProduct (query/internal/app), which starts the
// server, writes a fixed request log and passes:
//   MORAINE_SDKTEST_URL           the server's base URL
//   MORAINE_SDKTEST_KEY           API key of account A (the log's)
//   MORAINE_SDKTEST_OPERATOR_KEY  an operator key (of another account)
//   MORAINE_SDKTEST_FIXTURE       JSON: {account, keyId, day, logs, perDay:{...},
//                                 export: {address, firstDate, lastDate, txs: [hash...] in time order, days: [...]}}
//   MORAINE_SDKTEST_DOWN_URL      a second server whose Kafka is unreachable
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
const fx = JSON.parse(env("MORAINE_SDKTEST_FIXTURE"));
const client = (apiKey) =>
  new Avalanche({ serverURL: url, apiKey, enableTelemetry: false, retryConfig: { strategy: "none" } });
const sdk = client(env("MORAINE_SDKTEST_KEY"));
const operator = client(env("MORAINE_SDKTEST_OPERATOR_KEY"));
const anonymous = new Avalanche({ serverURL: url, enableTelemetry: false, retryConfig: { strategy: "none" } });
const opts = { serverURL: url, retries: { strategy: "none" } };
const range = { startTimestamp: fx.day, endTimestamp: fx.day + 86400 };

await step("getUsage: daily, every groupBy", async () => {
  const r = await sdk.data.usageMetrics.getUsage({ ...range }, opts);
  eq(r.orgId, fx.account, "orgId");
  eq(r.aggregateDuration, "daily", "aggregateDuration");
  eq(r.metrics.map((m) => [m.timestamp, m.values[0].totalRequests]), fx.perDay, "requests per day");
  const v = r.metrics[0].values[0];
  eq(v.groupedBy, "None", "groupedBy");
  check(v.successRatePercent > 0 && v.successRatePercent <= 100, `successRatePercent ${v.successRatePercent}`);
  check(v.medianResponseTimeMsecs > 0, `medianResponseTimeMsecs ${v.medianResponseTimeMsecs}`);
  check(v.apiCreditsUsed >= v.apiCreditsWasted, "credits wasted <= used");
  for (const groupBy of ["requestPath", "responseCode", "chainId", "apiKeyId", "requestType"]) {
    const g = await sdk.data.usageMetrics.getUsage({ ...range, groupBy }, opts);
    const total = g.metrics.flatMap((m) => m.values).reduce((s, x) => s + x.totalRequests, 0);
    eq(total, fx.logs, `${groupBy}: every request in some group`);
    check(g.metrics.every((m) => m.values.every((x) => x.groupedBy === groupBy && x.groupValue !== undefined)), `${groupBy}: groups`);
  }
});

await step("getUsage: every timeInterval, filters", async () => {
  for (const timeInterval of ["minute", "hourly", "daily", "weekly", "monthly"]) {
    const r = await sdk.data.usageMetrics.getUsage({ ...range, timeInterval }, opts);
    eq(r.aggregateDuration, timeInterval, "aggregateDuration");
    eq(r.metrics.flatMap((m) => m.values).reduce((s, x) => s + x.totalRequests, 0), fx.logs, `${timeInterval}: total`);
  }
  const r = await sdk.data.usageMetrics.getUsage({ ...range, responseCode: "404", apiKeyId: fx.keyId, requestType: "data",
    requestPath: "/v1/chains/{chainId}/blocks", chainId: "43114" }, opts);
  eq(r.metrics.flatMap((m) => m.values).reduce((s, x) => s + x.totalRequests, 0), fx.notFound, "filtered");
});

await step("getLogs: every page", async () => {
  const all = (await pages(sdk.data.usageMetrics.getLogs({ ...range, pageSize: 3 }, opts))).flatMap((p) => p.logs);
  eq(all.length, fx.logs, "logs");
  check(all.every((l, i) => i === 0 || all[i - 1].eventTimestamp >= l.eventTimestamp), "newest first");
  check(all.every((l) => l.orgId === fx.account && l.requestType === "data" && l.metadata.ipAddress !== ""), "fields");
  const first = await sdk.data.usageMetrics.getLogs({ ...range, responseCode: "404", pageSize: 100 }, opts);
  eq(first.result.logs.length, fx.notFound, "filtered logs");
  eq(first.result.nextPageToken, undefined, "last page has no token");
});

await step("operator key: every account", async () => {
  const r = await operator.data.usageMetrics.getUsage({ ...range, timeInterval: "monthly" }, opts);
  eq(r.orgId, "all", "orgId");
  check(r.metrics[0].values[0].totalRequests > fx.logs, "more than one account's requests");
  const one = await operator.data.usageMetrics.getUsage({ ...range, orgId: fx.account, timeInterval: "monthly" }, opts);
  eq(one.metrics[0].values[0].totalRequests, fx.logs, "one account");
});

await step("errors", async () => {
  await expectError(() => sdk.data.usageMetrics.getUsage({ orgId: "someone-else" }, opts), errors.ForbiddenError, 403, "other org");
  await expectError(() => anonymous.data.usageMetrics.getUsage({}, opts), errors.UnauthorizedError, 401, "no key");
  await expectError(() => sdk.data.usageMetrics.getUsage({ responseCode: "ok" }, opts), errors.BadRequestError, 400,
    "bad responseCode", ["responseCode must be an HTTP status code (100 to 599)"]);
  await expectError(() => sdk.data.usageMetrics.getLogs({ pageToken: "nope" }, opts), errors.BadRequestError, 400, "bad token");
});

await step("healthCheck, liveCheck", async () => {
  const h = await anonymous.data.healthCheck(opts);
  eq(h.status, "ok", "health status");
  eq(Object.keys(h.details).sort(), ["address_watch", "clickhouse_read", "clickhouse_write", "kafka"], "indicators");
  check(Object.values(h.info).every((i) => i.status === "up"), "all up");
  const l = await anonymous.data.liveCheck(opts);
  eq(l.status, "ok", "live status");
  // Kafka down: the SDK's typed 503, saying what is down; live-check still answers.
  const down = { serverURL: env("MORAINE_SDKTEST_DOWN_URL"), retries: { strategy: "none" } };
  const e = await expectError(() => anonymous.data.healthCheck(down), errors.ServiceUnavailableError, 503, "health with kafka down");
  check(e.data$.message.some((m) => m.startsWith("kafka is down")), `message ${JSON.stringify(e.data$.message)}`);
  eq((await anonymous.data.liveCheck(down)).status, "ok", "live with kafka down");
});

await step("exportTransactions, getResult, the file", async () => {
  const ex = fx.export;
  const req = { type: "TRANSACTION_EXPORT_EVM", firstDate: ex.firstDate, lastDate: ex.lastDate,
    options: { addresses: [ex.address], includeChains: ["43114"] } };
  const created = await sdk.data.operations.exportTransactions(req, opts);
  eq(created.operationType, "TRANSACTION_EXPORT_EVM", "operationType");
  eq(created.operationStatus, "RUNNING", "created RUNNING");
  let r = created;
  for (let i = 0; i < 300 && r.operationStatus === "RUNNING"; i++) {
    await new Promise((ok) => setTimeout(ok, 100));
    r = await sdk.data.operations.getResult({ operationId: created.operationId }, opts);
  }
  eq(r.operationStatus, "COMPLETED", "completed");
  check(r.updatedAtTimestamp >= r.createdAtTimestamp, "timestamps");
  const res = await fetch(r.metadata.downloadUrl); // no key: the link is signed
  eq(res.status, 200, "download status");
  const rows = (await res.text()).trim().split("\n").map((l) => l.split(","));
  eq(rows[0].slice(0, 6), ["chainId", "blockNumber", "blockTimestamp", "blockTime", "blockHash", "txHash"], "header");
  eq(rows.slice(1).map((x) => x[5]), ex.txs, "every transaction, in time order");

  // One day fewer: the plan (this account's: exportTransactions) is not at stake, the range is.
  const last = await sdk.data.operations.exportTransactions({ ...req, firstDate: ex.lastDate }, opts);
  check(last.operationId !== created.operationId, "a new operation");
  await expectError(() => sdk.data.operations.exportTransactions({ ...req, firstDate: ex.lastDate, lastDate: ex.firstDate }, opts),
    errors.BadRequestError, 400, "backwards range", [`lastDate ${ex.firstDate} is before firstDate ${ex.lastDate}`]);
  await expectError(() => sdk.data.operations.exportTransactions({ ...req, lastDate: "2999-01-01" }, opts),
    errors.BadRequestError, 400, "future");
  await expectError(() => sdk.data.operations.getResult({ operationId: "00000000-0000-0000-0000-000000000000" }, opts),
    errors.NotFoundError, 404, "unknown operation");
  await expectError(() => operator.data.operations.getResult({ operationId: created.operationId }, opts),
    errors.NotFoundError, 404, "another account's operation");
  await expectError(() => anonymous.data.operations.getResult({ operationId: created.operationId }, opts),
    errors.UnauthorizedError, 401, "no key");
});

finish("product contract");
