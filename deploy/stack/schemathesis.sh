#!/usr/bin/env bash
# schemathesis (property-based API testing, from PyPI) for the query service's fuzz test: it reads the served
# OpenAPI document (/api-json) and sends generated requests, checking every answer against the document.
# Installed into a venv in the state dir, beside chDB's (chdb.sh), so `make test` needs nothing by hand.
#
# Usage: schemathesis.sh install   (idempotent; prints the path of the schemathesis command)
set -euo pipefail
readonly SCHEMATHESIS_VERSION=4.32.5
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
STATE_DIR=${MORAINE_STATE_DIR:-$REPO_ROOT/.moraine}
VENV=$STATE_DIR/schemathesis-venv

case ${1:-install} in
install)
    if [ -x "$VENV/bin/st" ] && [ "$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("schemathesis"))' 2>/dev/null)" = "$SCHEMATHESIS_VERSION" ]; then
        echo "$VENV/bin/st"
        exit 0
    fi
    mkdir -p "$STATE_DIR"
    python3 -m venv "$VENV" >&2 || { echo "schemathesis.sh: python3 -m venv failed (apt-get install python3-venv?)" >&2; exit 1; }
    if ! "$VENV/bin/pip" install -q "schemathesis==$SCHEMATHESIS_VERSION" >&2; then
        echo "schemathesis.sh: pip could not install schemathesis==$SCHEMATHESIS_VERSION from PyPI" >&2
        exit 1
    fi
    echo "$VENV/bin/st"
    ;;
*) echo "usage: schemathesis.sh install" >&2; exit 2 ;;
esac
