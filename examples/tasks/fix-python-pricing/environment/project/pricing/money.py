"""Money arithmetic. Amounts are decimal.Decimal values with two places."""
from decimal import Decimal, ROUND_HALF_UP

CENT = Decimal("0.01")


def _q(x):
    return Decimal(x).quantize(CENT, rounding=ROUND_HALF_UP)


def parse_money(text):
    """'1,234.50' -> Decimal('1234.50'); '$3' -> Decimal('3.00');
    '(12.00)' (accounting negative) -> Decimal('-12.00')."""
    s = text.strip().replace("$", "")
    return _q(float(s))


def format_money(amount):
    """Decimal('-1234.5') -> '-$1,234.50'."""
    sign = "-" if amount < 0 else ""
    return f"{sign}${abs(amount):,.2f}"


def apply_discount(amount, percent):
    """Price after a percentage discount, rounded half-up to the cent."""
    return _q(amount - amount * Decimal(percent) / 10)


def split_evenly(amount, parts):
    """Split amount into `parts` shares that differ by at most one cent and
    add up exactly to amount; larger shares come first."""
    share = _q(amount / parts)
    return [share] * parts


def invoice_total(lines, discount_percent=0):
    """lines: iterable of (quantity, unit_price_text). The discount applies to
    the sum of the line totals."""
    total = Decimal(0)
    for qty, price in lines:
        total = _q(qty * parse_money(price))
    return apply_discount(total, discount_percent)
