# Shared by bench/backfill.sh and bench/soak.sh: put a long run's report into bench/results.md and
# README.md between <!-- NAME:start --> and <!-- NAME:end --> (appended when the markers are absent).
# bench/run.sh keeps these sections when it rewrites results.md.
# Usage: splice_report NAME FILE
splice_report() {
    python3 - "$1" "$2" <<'PY'
import re, sys
name, path = sys.argv[1], sys.argv[2]
body = open(path).read().strip()
for target, heading in (("bench/results.md", "## "), ("README.md", "### ")):
    text = open(target).read()
    block = f"<!-- {name}:start -->\n" + body.replace("\n## ", "\n" + heading) + f"\n<!-- {name}:end -->"
    if heading == "### " and body.startswith("## "):
        block = block.replace(f"<!-- {name}:start -->\n## ", f"<!-- {name}:start -->\n### ", 1)
    pat = re.compile(f"<!-- {name}:start -->.*?<!-- {name}:end -->", re.S)
    if pat.search(text):
        text = pat.sub(lambda m: block, text)
    elif target == "README.md" and "<!-- bench:end -->" in text:
        text = text.replace("<!-- bench:end -->", "<!-- bench:end -->\n\n" + block, 1)
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    open(target, "w").write(text)
PY
}
