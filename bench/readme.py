"""Write the benchmark summaries into README.md between their markers.

The README carries a short summary of each benchmark; the full output stays in
bench/results.md (and bench/soak.md, bench/backfill.md), the story of how the
figures came to be in bench/history.md.

  python3 bench/readme.py bench              summary of bench/results.md (make bench)
  python3 bench/readme.py soak|backfill FILE summary of a long run's report (bench/longrun.sh)
"""
import re
import sys

README = "README.md"


def splice(name, body):
    """Replace what stands between <!-- name:start --> and <!-- name:end -->,
    appending the section after the bench markers (or at the end) when absent."""
    text = open(README).read()
    block = f"<!-- {name}:start -->\n{body.strip()}\n<!-- {name}:end -->"
    pat = re.compile(f"<!-- {name}:start -->.*?<!-- {name}:end -->", re.S)
    if pat.search(text):
        text = pat.sub(lambda m: block, text)
    elif name != "bench" and "<!-- bench:end -->" in text:
        text = text.replace("<!-- bench:end -->", "<!-- bench:end -->\n\n" + block, 1)
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    open(README, "w").write(text)


def field(line, key):
    m = re.search(rf"\b{key}=(\S+)", line or "")
    return m.group(1) if m else "?"


def bench_summary(path):
    t = open(path).read()
    measured = re.search(r"^Measured .*$", t, re.M)
    median = re.search(r"^\*\*median of (.*)\*\*$", t, re.M)
    # querybench load prints one line per path, then "all"; the list path has no "/" after "blocks".
    newest = re.search(r"^/v1/chains/\d+/blocks\s.*$", t, re.M)
    lookup = re.search(r"^/v1/chains/\d+/blocks/\{rand:.*$", t, re.M)
    latency = re.search(r"^webhook latency: .*?p50 (\S+), p99 (\S+?),", t, re.M)
    sustained = re.search(r"^delivery-sustained: .*?= (\d+) deliveries/s", t, re.M)

    def q(m):
        return f"p50 {field(m.group(0), 'p50')}, p99 {field(m.group(0), 'p99')}" if m else "not measured"

    rows = [
        ("10,000 tx/s end to end (Gunzilla replay backfill)",
         "median of " + median.group(1).replace(" (each run below)", "") if median else "not measured"),
        ("`GET /blocks` p99 < 20 ms at 500 req/s (10M blocks)", q(newest)),
        ("`GET /blocks/{number}` p99 < 20 ms at 500 req/s (random over 10M blocks, warm cache)", q(lookup)),
        ("webhook latency p50 100 ms, p99 300 ms", f"p50 {latency.group(1)}, p99 {latency.group(2)}" if latency else "not measured"),
        ("5,000 signed deliveries/s", f"{int(sustained.group(1)):,}/s" if sustained else "not measured"),
    ]
    rt = re.search(r"^replay throughput: (\d+) messages .*?produced in \S+ \((\d+) msg/s\), delivered in \S+ \((\d+) msg/s\)", t, re.M)
    rows.append(("webhook replay throughput (a corpus chain's busiest address)",
                 f"{int(rt.group(1)):,} messages: produced {int(rt.group(2)):,}/s, delivered {int(rt.group(3)):,}/s" if rt else "not measured"))
    rl = re.search(r"^replay live latency: without the replay \d+ messages, p50 (\S+), p99 (\S+); during it \d+ messages, p50 (\S+), p99 (\S+),", t, re.M)
    rows.append(("live webhook p99 <= 300 ms while a large replay runs",
                 f"during: p50 {rl.group(3)}, p99 {rl.group(4)} (without: p50 {rl.group(1)}, p99 {rl.group(2)})" if rl else "not measured"))
    rets = re.findall(r"^reorg of depth (\d+): (\d+) retractions to /c0, first (\S+) and last (\S+) after the reorg", t, re.M)
    rows.append(("retraction latency after a reorg (reorg on the node to the retractions received)",
                 "; ".join(f"depth {d}: first {f}, last {l}" for d, _, f, l in rets) if rets else "not measured"))
    scaling = re.search(r"^scaling result: .*?(each instance capped at [\d.]+ cores|uncapped), median of \d+ rounds: (.*)$", t, re.M)
    rows.append(("processor: 1.8x from 1 to 2 and 3.2x from 1 to 4 instances, four chains at once",
                 f"{scaling.group(2)} ({scaling.group(1)})" if scaling else "not measured"))
    nodes = re.search(r"^nodes result: median blocks/s with 1, 2, 4 nodes: ([\d.]+), ([\d.]+), ([\d.]+); 4 nodes / 1 node = ([\d.]+)x", t, re.M)
    rows.append(("backfill bound by its nodes (40 traced blocks/s each): 4 nodes vs 1, goal 3.5x",
                 f"1, 2, 4 nodes: {nodes.group(1)}, {nodes.group(2)}, {nodes.group(3)} blocks/s: {nodes.group(4)}x" if nodes else "not measured"))
    verify = re.search(r"^nodes verify: (\d+) µs per block .*?, conversion (\d+) µs per block", t, re.M)
    rows.append(("block verification's cost (receipts root, logs bloom, transactions root)",
                 f"{verify.group(1)} µs per block, stage wall time (conversion: {verify.group(2)} µs)" if verify else "not measured"))
    failover = re.search(r"^failover result: .*?no fault (\S+), node killed (\S+), node frozen (\S+)", t, re.M)
    rows.append(("failover at the head, one of two nodes lost (to the next block produced)",
                 f"killed {failover.group(2)}, frozen {failover.group(3)} (no fault: {failover.group(1)})" if failover else "not measured"))
    # The transaction-history routes (bench/history.sh), each alone at 200 req/s.
    size = re.search(r"^transactions each\); a fifth .* On disk: ([\d.]+ \S+?)\.", t, re.M)
    txs = re.search(r"^Data: ([\d,]+) synthetic transactions", t, re.M)
    data = ", ".join(x for x in [txs.group(1) + " transactions" if txs else "", size.group(1) + " on disk" if size else ""] if x)
    for goal, pat in [
        ("an address's transactions, first page", r"^/v1/chains/\d+/addresses/\{addr:[^}]*\}/transactions\s.*$"),
        ("page 1,000 of the busiest address", r"^/v1/chains/\d+/addresses/0x[0-9a-f]+/transactions\?pageToken=TOKEN\s.*$"),
        ("a transaction by hash", r"^/v1/chains/\d+/transactions/\{txhash:.*$"),
        ("an address's ERC-20 transfers", r"^/v1/chains/\d+/addresses/\{addr:[^}]*\}/transactions:listErc20\s.*$"),
    ]:
        rows.append((f"{goal}: p99 <= 50 ms at 200 req/s ({data})",
                     q(re.search(pat, t, re.M))))
    # The balance routes (bench/balances.sh), each alone at 200 req/s.
    btxs = re.search(r"^Data: the balance state of ([\d,]+) synthetic transactions", t, re.M)
    bdata = btxs.group(1) + " transactions" if btxs else "?"
    for goal, pat in [
        ("listErc20Balances of a holder of 1,000 tokens, at the head", r"^/v1/chains/\d+/addresses/0x[0-9a-f]+/balances:listErc20\?pageSize=100\s.*$"),
        ("listErc20Balances of a holder of 1,000 tokens, at a random past block", r"^/v1/chains/\d+/addresses/0x[0-9a-f]+/balances:listErc20\?pageSize=100&blockNumber=\{rand:.*$"),
        ("listErc721Balances of a holder of 10,000 NFTs", r"^/v1/chains/\d+/addresses/0x[0-9a-f]+/balances:listErc721\?pageSize=100\s.*$"),
    ]:
        rows.append((f"{goal}: p99 <= 50 ms at 200 req/s (the balances of {bdata})", q(re.search(pat, t, re.M))))
    curve = re.findall(r"^(?:pool account|curve|router \d.*?)\s+([\d,]+) delta rows.*?p99=(\S+).*?granules read/request (\d+)", t, re.M)
    if curve:
        rows.append(("a balance at an old block does not cost more as the holder's transfers grow (p99, granules read)",
                     "; ".join(f"{n} transfers: p99 {p}, {r} granules" for n, p, r in curve)))
    # The API as a product (bench/usage.sh).
    for route, goal in [("/v1/chains/99999/blocks:", "`GET /blocks`"), ("/v1/chains/99999/blocks/{rand", "`GET /blocks/{number}`")]:
        m = re.search(rf"^{re.escape(route)}.*?logging on p50 \S+ p99 (\S+)(?: \(rounds \S+\))?; off p50 \S+ p99 (\S+)(?: \(rounds \S+\))?; p99 (\S+) with logging; "
                      r"query CPU per 1,000 requests (\d+) ms on, (\d+) ms off \((\S+)\)", t, re.M)
        rows.append((f"{goal} with request logging on vs off: p99 at most 5% worse at 500 req/s",
                     f"p99 {m.group(1)} on, {m.group(2)} off ({m.group(3)}); query CPU {m.group(6)}" if m else "not measured"))
    outage = re.search(r"^usage-outage: (\d+) requests answered .*?; logged \d+, lost (\d+), logged twice (\d+); the log had them all (\S+) after", t, re.M)
    rows.append(("request records lost across a 60 s ClickHouse outage under load: none",
                 f"lost {outage.group(2)} of {int(outage.group(1)):,}, {outage.group(3)} logged twice; all logged {outage.group(4)} after ClickHouse returned"
                 if outage else "not measured"))

    def ms(v):
        n, unit = re.match(r"([0-9.]+)([a-zµ]+)", v).groups()
        return float(n) * {"ns": 1e-6, "µs": 1e-3, "us": 1e-3, "ms": 1, "s": 1000}[unit]
    reads = [(ms(field(l, "p99")), l.split()[0], l.split()[1]) for l in re.findall(r"^(?:heavy|median|operator) /v1/api\S+\s.*$", t, re.M)]
    reqs = re.search(r"^Usage reads over ([\d,]+) logged requests", t, re.M)
    if reads:
        worst = max(reads)
        rows.append((f"usage queries over {reqs.group(1) if reqs else '10,000,000'} logged requests: p99 <= 100 ms",
                     f"worst p99 {worst[0]:.2f}ms ({worst[1]} key, `{worst[2].split('?')[0]}`) over {len(reads)} kinds of read"))
    else:
        rows.append(("usage queries over 10,000,000 logged requests: p99 <= 100 ms", "not measured"))
    out = [(measured.group(0) if measured else "") + " Every run and stage: [`bench/results.md`](bench/results.md).", ""]
    out += ["| Goal | Measured |", "|---|---|"]
    out += [f"| {g} | {m} |" for g, m in rows]
    return "\n".join(out)


def longrun_summary(name, path):
    t = open(path).read().strip()
    heading = t.splitlines()[0].lstrip("#").strip()
    measured = re.search(r"^Measured .*$", t, re.M)
    # make bench-backfill runs twice (nothing served, then serving first): each run's "phase" line heads
    # its summary.
    lines = [l for l in t.splitlines() if l.startswith((f"{name} summary", f"{name} phase"))]
    out = [f"### {heading}", ""]
    # The harness's note (MORAINE_BENCH_NOTE) says at what scale the run was made: kept.
    note = t.split("\n\n")[1] if "\n\n" in t else ""
    if note and not note.startswith("Measured"):
        out += [note, ""]
    if measured:
        out += [measured.group(0) + f" Full report: [`{path}`]({path}).", ""]
    out += ["```"] + lines + ["```"]
    return "\n".join(out)


if __name__ == "__main__":
    if sys.argv[1] == "bench":
        splice("bench", bench_summary("bench/results.md"))
    else:
        splice(sys.argv[1], longrun_summary(sys.argv[1], sys.argv[2]))
