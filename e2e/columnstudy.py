"""Column types and codecs on current ClickHouse (chDB), for the backfill benchmark's column study.

Reads a JSON object on stdin: {"native": {table: path of a Native file}, "variants": [{"table", "name",
"ddl"}]}. For each variant it creates the table from its DDL (the table is named as in the DDL), loads
the table's Native file into it, merges it into one part (OPTIMIZE FINAL) and measures every column
(system.columns) and the whole (system.parts). Prints a JSON list of {"table", "name", "rows",
"bytes_on_disk", "columns": [{"name", "type", "compressed", "uncompressed"}]} or {"error"}.
"""
import json
import sys
import tempfile

from chdb import session

req = json.load(sys.stdin)
out = []
with tempfile.TemporaryDirectory() as d:
    s = session.Session(d)
    s.query("CREATE DATABASE IF NOT EXISTS study")
    s.query("USE study")
    for v in req["variants"]:
        res = {"table": v["table"], "name": v["name"]}
        try:
            name = v["ddl"].split("TABLE", 1)[1].split("(", 1)[0].strip()
            s.query("DROP TABLE IF EXISTS " + name)
            s.query(v["ddl"])
            path = req["native"][v["table"]].replace("'", "\\'")
            s.query(f"INSERT INTO {name} SELECT * FROM file('{path}', 'Native')")
            s.query(f"OPTIMIZE TABLE {name} FINAL")
            parts = json.loads(s.query(
                f"SELECT sum(rows) AS rows, sum(bytes_on_disk) AS bytes FROM system.parts "
                f"WHERE database = 'study' AND table = '{name}' AND active", "JSON").bytes())["data"][0]
            cols = json.loads(s.query(
                f"SELECT name, type, data_compressed_bytes AS compressed, data_uncompressed_bytes AS uncompressed "
                f"FROM system.columns WHERE database = 'study' AND table = '{name}'", "JSON").bytes())["data"]
            res.update(rows=int(parts["rows"]), bytes_on_disk=int(parts["bytes"]),
                       columns=[{"name": c["name"], "type": c["type"], "compressed": int(c["compressed"]),
                                 "uncompressed": int(c["uncompressed"])} for c in cols])
            s.query("DROP TABLE " + name)
        except Exception as e:  # chDB raises a plain exception with the server's message
            res["error"] = str(e)[:2000]
        out.append(res)
    s.close()
json.dump(out, sys.stdout)
