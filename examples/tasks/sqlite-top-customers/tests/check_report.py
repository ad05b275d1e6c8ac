"""Runs /app/report.sql through the sqlite3 CLI and compares with the reference."""
import csv, io, re, sqlite3, subprocess, sys

REFERENCE = """
SELECT c.email, COUNT(DISTINCT o.id), SUM(oi.quantity * oi.unit_price_cents)
FROM customers c
JOIN orders o ON o.customer_id = c.id
JOIN order_items oi ON oi.order_id = o.id
WHERE o.status IN ('shipped', 'delivered')
  AND o.placed_at BETWEEN '2024-01-01 00:00:00' AND '2024-12-31 23:59:59'
GROUP BY c.id
ORDER BY 3 DESC, 1 ASC
LIMIT 5
"""


def check(db):
    try:
        sql = open("/app/report.sql").read()
    except OSError as e:
        print(f"FAIL {e}")
        return False
    r = subprocess.run(["sqlite3", "-header", "-csv", db], input=sql, capture_output=True, text=True, timeout=30)
    if r.returncode != 0 or r.stderr.strip():
        print(f"FAIL sqlite3 on {db}: exit {r.returncode}: {r.stderr.strip()}")
        return False
    rows = list(csv.reader(io.StringIO(r.stdout)))
    want = [(e, n, f"{cents / 100:.2f}") for e, n, cents in sqlite3.connect(db).execute(REFERENCE)]
    ok = True
    if not rows or rows[0] != ["email", "orders", "total"]:
        print(f"FAIL {db}: header {rows[:1]} != ['email', 'orders', 'total']")
        return False
    got = rows[1:]
    if len(got) != len(want):
        print(f"FAIL {db}: {len(got)} rows, expected {len(want)}")
        ok = False
    for i, (g, w) in enumerate(zip(got, want)):
        if len(g) != 3 or g[0] != w[0] or g[1] != str(w[1]) or not re.fullmatch(r"\d+\.\d\d", g[2]) or g[2] != w[2]:
            print(f"FAIL {db}: row {i + 1}: got {g}, expected {list(map(str, w))}")
            ok = False
    if ok:
        print(f"PASS {db}: {len(got)} rows match")
    return ok


results = [check(db) for db in sys.argv[1:]]
sys.exit(0 if all(results) else 1)
