#!/bin/bash
# Oracle solution: join orders and items, count distinct orders, use the paid price.
set -euo pipefail
cat > /app/report.sql <<'SQL'
SELECT c.email AS email,
       COUNT(DISTINCT o.id) AS orders,
       printf('%.2f', SUM(oi.quantity * oi.unit_price_cents) / 100.0) AS total
FROM customers c
JOIN orders o ON o.customer_id = c.id
JOIN order_items oi ON oi.order_id = o.id
WHERE o.status IN ('shipped', 'delivered')
  AND o.placed_at >= '2024-01-01' AND o.placed_at < '2025-01-01'
GROUP BY c.id
ORDER BY SUM(oi.quantity * oi.unit_price_cents) DESC, c.email ASC
LIMIT 5;
SQL
sqlite3 -header -csv /app/shop.db < /app/report.sql
