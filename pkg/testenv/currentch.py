"""Runs SQL statements on current ClickHouse (chDB) for moraine's portability tests.

Reads a JSON list of statements on stdin, runs them in order in one chDB session with a scratch
database selected, and prints a JSON list of {"ok": bool, "error": str} results. LowCardinality and
other settings behave as in a default server.
"""
import json
import sys
import tempfile

from chdb import session

stmts = json.load(sys.stdin)
results = []
with tempfile.TemporaryDirectory() as d:
    s = session.Session(d)
    s.query("CREATE DATABASE IF NOT EXISTS moraine_check")
    s.query("USE moraine_check")
    for st in stmts:
        try:
            s.query(st, "Null")
            results.append({"ok": True, "error": ""})
        except Exception as e:  # chDB raises a plain exception with the server's message
            results.append({"ok": False, "error": str(e)[:2000]})
    s.close()
json.dump(results, sys.stdout)
