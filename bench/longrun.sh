# Shared by bench/backfill.sh and bench/soak.sh: put a long run's report into bench/results.md, and its
# summary into README.md (bench/readme.py), between <!-- NAME:start --> and <!-- NAME:end --> (appended
# when the markers are absent). bench/run.sh keeps these sections when it rewrites results.md.
# Usage: splice_report NAME FILE
splice_report() {
    python3 - "$1" "$2" <<'PY'
import re, sys
name, path = sys.argv[1], sys.argv[2]
body = open(path).read().strip()
target = "bench/results.md"
text = open(target).read()
block = f"<!-- {name}:start -->\n{body}\n<!-- {name}:end -->"
pat = re.compile(f"<!-- {name}:start -->.*?<!-- {name}:end -->", re.S)
if pat.search(text):
    text = pat.sub(lambda m: block, text)
else:
    text = text.rstrip("\n") + "\n\n" + block + "\n"
open(target, "w").write(text)
PY
    python3 bench/readme.py "$1" "$2"
}
