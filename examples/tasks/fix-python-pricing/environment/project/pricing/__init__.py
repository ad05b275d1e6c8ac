"""Money helpers for the invoicing service."""
from .money import parse_money, format_money, apply_discount, split_evenly, invoice_total

__all__ = ["parse_money", "format_money", "apply_discount", "split_evenly", "invoice_total"]
