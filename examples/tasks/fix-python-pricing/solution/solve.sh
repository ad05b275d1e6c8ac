#!/bin/bash
# Oracle solution: exact Decimal parsing, percent/100, remainder-aware split,
# and accumulate (not overwrite) the invoice total.
set -euo pipefail
cd /app/project
cat > pricing/money.py <<'PY'
"""Money arithmetic. Amounts are decimal.Decimal values with two places."""
from decimal import Decimal, ROUND_HALF_UP

CENT = Decimal("0.01")


def _q(x):
    return Decimal(x).quantize(CENT, rounding=ROUND_HALF_UP)


def parse_money(text):
    """'1,234.50' -> Decimal('1234.50'); '$3' -> Decimal('3.00');
    '(12.00)' (accounting negative) -> Decimal('-12.00')."""
    s = text.strip()
    negative = s.startswith("(") and s.endswith(")")
    if negative:
        s = s[1:-1].strip()
    s = s.replace("$", "").replace(",", "").strip()
    value = _q(Decimal(s))
    return -value if negative else value


def format_money(amount):
    """Decimal('-1234.5') -> '-$1,234.50'."""
    sign = "-" if amount < 0 else ""
    return f"{sign}${abs(amount):,.2f}"


def apply_discount(amount, percent):
    """Price after a percentage discount, rounded half-up to the cent."""
    return _q(amount - amount * Decimal(percent) / 100)


def split_evenly(amount, parts):
    """Split amount into `parts` shares that differ by at most one cent and
    add up exactly to amount; larger shares come first."""
    cents = int(_q(amount) / CENT)
    base, extra = divmod(cents, parts)
    return [(Decimal(base + (1 if i < extra else 0)) * CENT).quantize(CENT) for i in range(parts)]


def invoice_total(lines, discount_percent=0):
    """lines: iterable of (quantity, unit_price_text). The discount applies to
    the sum of the line totals."""
    total = Decimal(0)
    for qty, price in lines:
        total += _q(qty * parse_money(price))
    return apply_discount(total, discount_percent)
PY
python3 -m unittest discover -s tests -v
