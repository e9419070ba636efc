"""Confidence intervals from repeats, with the standard library.

A speedup is baseline time / SD time. The tuner measures the baseline next to each configuration
(benchmark/tuner.py), so each repeat gives one paired ratio; the interval is Student's t interval
of the mean of their logarithms, exponentiated (a geometric mean, whose interval is not symmetric
around it): what moves both sides of a pair (drift between blocks, a node's state) cancels, as it
would not in a two-sample interval of measurements taken hours apart. The same interval serves any
positive figure measured once per repeat (the draft's cost ratio c).

Student's t quantile comes from its distribution function, F(t) = 1 - I_x(df/2, 1/2) / 2 with
x = df / (df + t^2) for t >= 0 (Abramowitz & Stegun 26.7.1, 26.5.27), the regularized incomplete
beta I_x evaluated by its continued fraction (A&S 26.5.8, Lentz's method), and the quantile by
bisection. Tests check it against published t tables.
"""
from __future__ import annotations

import math
import statistics

CONFIDENCE = 0.95


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (A&S 26.5.8), by Lentz's method."""
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 500):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return result


def incomplete_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), regularized."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1 - math.exp(log_front) * _beta_fraction(b, a, 1 - x) / b


def t_cdf(t: float, df: float) -> float:
    tail = incomplete_beta(df / 2, 0.5, df / (df + t * t)) / 2
    return 1 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The t such that P(T <= t) = p, for 0.5 <= p < 1."""
    low, high = 0.0, 1.0
    while t_cdf(high, df) < p:
        high *= 2
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (middle, high) if t_cdf(middle, df) < p else (low, middle)
    return (low + high) / 2


def log_interval(values: list[float], confidence: float = CONFIDENCE) -> dict:
    """The geometric mean of positive `values` and Student's t interval of the mean of their
    logarithms, exponentiated (None with one value)."""
    logs = [math.log(v) for v in values]
    centre = statistics.fmean(logs)
    result = {"value": math.exp(centre), "low": None, "high": None, "df": None}
    if len(logs) < 2:
        return result
    df = len(logs) - 1
    half = t_quantile(1 - (1 - confidence) / 2, df) * statistics.stdev(logs) / math.sqrt(len(logs))
    return {**result, "low": math.exp(centre - half), "high": math.exp(centre + half), "df": df}
