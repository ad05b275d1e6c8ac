"""Hidden checks for pricing (run with cwd = /app/project, PYTHONPATH set)."""
import inspect
import sys
import unittest
from decimal import Decimal as D

sys.path.insert(0, ".")
from pricing import parse_money, format_money, apply_discount, split_evenly, invoice_total  # noqa: E402


class Hidden(unittest.TestCase):
    def test_parse_forms(self):
        cases = {"3": "3.00", "$3": "3.00", " $1,000,000.01 ": "1000000.01", "(12.00)": "-12.00",
                 "($1,234.56)": "-1234.56", "0.285": "0.29", "0.284": "0.28", "2.675": "2.68",
                 "12345678901234567.89": "12345678901234567.89", "-4.5": "-4.50"}
        for text, want in cases.items():
            with self.subTest(text=text):
                got = parse_money(text)
                self.assertIsInstance(got, D)
                self.assertEqual(got, D(want))
                self.assertEqual(str(got), want)

    def test_discount(self):
        self.assertEqual(apply_discount(D("19.99"), 10), D("17.99"))
        self.assertEqual(apply_discount(D("0.05"), 50), D("0.03"))
        self.assertEqual(apply_discount(D("100.00"), 0), D("100.00"))
        self.assertEqual(apply_discount(D("80.00"), 100), D("0.00"))

    def test_split_exact(self):
        for amount, parts in [("10.00", 3), ("0.05", 3), ("100.00", 7), ("0.00", 4), ("1234.57", 10), ("5.00", 1)]:
            with self.subTest(amount=amount, parts=parts):
                shares = split_evenly(D(amount), parts)
                self.assertEqual(len(shares), parts)
                self.assertEqual(sum(shares), D(amount))
                self.assertLessEqual(max(shares) - min(shares), D("0.01"))
                self.assertEqual(shares, sorted(shares, reverse=True))
                for s in shares:
                    self.assertEqual(s, s.quantize(D("0.01")))

    def test_invoice(self):
        lines = [(3, "$19.99"), (2, "1,000.00"), (1, "(5.00)"), (7, "0.285")]
        self.assertEqual(invoice_total(lines), D("2057.00"))
        self.assertEqual(invoice_total(lines, 10), D("1851.30"))
        self.assertEqual(invoice_total([]), D("0.00"))

    def test_format_unchanged(self):
        self.assertEqual(format_money(D("0")), "$0.00")
        self.assertEqual(format_money(D("1234567.891")), "$1,234,567.89")

    def test_signatures(self):
        self.assertEqual(list(inspect.signature(split_evenly).parameters), ["amount", "parts"])
        self.assertEqual(list(inspect.signature(invoice_total).parameters), ["lines", "discount_percent"])


if __name__ == "__main__":
    unittest.main()
