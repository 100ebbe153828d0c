"""Significant figures, one rule for every surface: the JSON answer's speed figures (3 significant digits,
``calculator.engine.perf``), the page's (2, ``calculator.templatetags.calculator_tags.sig``) and the link preview's
(the page's filter) all round here, half up on the decimal the float prints as (``635.0`` to 2 figures is ``640``,
``0.125`` to 2 is ``0.13``), never by the float's binary expansion (Python's ``round(0.125, 2)`` is ``0.12``)."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal


def sig_decimal(x: float, digits: int) -> Decimal:
    """``x`` to ``digits`` significant figures, rounded half up on ``repr(x)`` (the shortest decimal that reads back
    as ``x``). ``x`` must be finite and non-zero."""
    d = Decimal(repr(float(x)))
    return d.quantize(Decimal(1).scaleb(d.adjusted() - (digits - 1)), rounding=ROUND_HALF_UP)


def round_sig(x: float | None, digits: int = 3) -> float | None:
    """``x`` to ``digits`` significant figures as a float (:func:`sig_decimal`); ``None``, 0 and non-finite values
    unchanged."""
    if x is None or x == 0 or x != x or x in (float("inf"), float("-inf")):
        return x
    return float(sig_decimal(x, digits))


def sig_text(x: float, digits: int = 2) -> str:
    """``x`` to ``digits`` significant figures as text with thousands separators (:func:`sig_decimal`): ``1234.5``
    -> ``1,200``, ``12.345`` -> ``12``, ``0.01234`` -> ``0.012``, ``9.96`` -> ``10``, ``635.0`` -> ``640``; 0 and
    non-finite values as ``%g``."""
    x = float(x)
    if x == 0 or x != x or x in (float("inf"), float("-inf")):
        return f"{x:g}"
    d = sig_decimal(x, digits)
    decimals = max(0, digits - 1 - d.adjusted())  # 9.96 -> 10: one figure more before the point, one fewer after
    return f"{d:,.{decimals}f}"
