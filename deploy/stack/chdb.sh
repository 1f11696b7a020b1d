#!/usr/bin/env bash
# Current ClickHouse for portability checks: moraine's statements must run on ClickHouse 18.16 (the local
# stack) and on current releases. No current server package is reachable here, so tests run statements
# in chDB (the ClickHouse engine as a Python module, from PyPI) installed into a venv in the state dir.
#
# Usage: chdb.sh install   (idempotent; prints the venv's python path)
set -euo pipefail
readonly CHDB_CORE_VERSION=26.9.0
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
STATE_DIR=${MORAINE_STATE_DIR:-$REPO_ROOT/.moraine}
VENV=$STATE_DIR/chdb-venv

case ${1:-install} in
install)
    if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import chdb" 2>/dev/null; then
        echo "$VENV/bin/python"
        exit 0
    fi
    mkdir -p "$STATE_DIR"
    python3 -m venv "$VENV" >&2 || { echo "chdb.sh: python3 -m venv failed (apt-get install python3-venv?)" >&2; exit 1; }
    if ! "$VENV/bin/pip" install -q "chdb-core==$CHDB_CORE_VERSION" "chdb" >&2; then
        echo "chdb.sh: pip could not install chdb-core==$CHDB_CORE_VERSION from PyPI" >&2
        exit 1
    fi
    echo "$VENV/bin/python"
    ;;
*) echo "usage: chdb.sh install" >&2; exit 2 ;;
esac
