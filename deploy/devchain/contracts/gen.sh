#!/bin/sh
# Regenerates build/*.abi and build/*.bin from Moraine.sol and MoraineMeta.sol with solc-js (npm package "solc").
# Run through `go generate ./devchain` (needs node and npx; fetches solc from the npm registry once).
set -eu
cd "$(dirname "$0")"
SOLC_VERSION=0.8.28
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
npx --yes "solc@$SOLC_VERSION" --optimize --optimize-runs 200 --abi --bin -o "$tmp" Moraine.sol MoraineMeta.sol >/dev/null
mkdir -p build
rm -f build/*.abi build/*.bin
for f in "$tmp"/Moraine_sol_* "$tmp"/MoraineMeta_sol_*; do
	base=$(basename "$f")
	name=${base#MoraineMeta_sol_}
	name=${name#Moraine_sol_}
	case "$name" in
	I*) continue ;; # interfaces have no bytecode worth keeping
	MetaURI.*) continue ;; # a library of internal functions, inlined
	esac
	cp "$f" "build/$name"
done
ls build
