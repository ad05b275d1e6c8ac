import unittest
from decimal import Decimal as D

from pricing import parse_money, format_money, apply_discount, split_evenly, invoice_total


class TestMoney(unittest.TestCase):
    def test_parse_plain(self):
        self.assertEqual(parse_money("19.99"), D("19.99"))

    def test_parse_grouping(self):
        self.assertEqual(parse_money("$1,234.50"), D("1234.50"))

    def test_format(self):
        self.assertEqual(format_money(D("-1234.5")), "-$1,234.50")

    def test_discount(self):
        self.assertEqual(apply_discount(D("200.00"), 15), D("170.00"))

    def test_split(self):
        self.assertEqual(split_evenly(D("10.00"), 3), [D("3.34"), D("3.33"), D("3.33")])

    def test_invoice(self):
        self.assertEqual(invoice_total([(2, "5.00"), (1, "0.10")]), D("10.10"))


if __name__ == "__main__":
    unittest.main()
