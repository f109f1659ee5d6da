"""The statistics of experiments: 95 % intervals, differences to the control, and the
sequential test behind guardrails. Pure Python (``math``): every input is a count, a mean and a
standard deviation aggregated in SQL.

* Rates get **Wilson score intervals** (right near 0 and 1, where the normal one is not).
* Means get **normal intervals** (mean ± 1.96 · sd/√n; the central limit theorem at the turn
  counts results are read at).
* A difference to the control is **significant** when the 95 % interval of the difference
  (normal, unpooled: Welch's standard error) excludes 0 — a fixed-sample test, for reading
  results once; under repeated looks use the guardrails' test below.
* Guardrails use the **mixture sequential probability ratio test** (mSPRT; Robbins 1970,
  Johari, Pekelis & Walsh, *Always valid inference*, 2017) for a difference of means (a rate is
  the mean of a 0/1 outcome): with ``V`` the variance of the estimated difference ``d`` (arm −
  control) and a normal mixture of variance ``τ²`` over the alternative,
  ``Λ = √(V / (V + τ²)) · exp(τ² (d − θ₀)² / (2 V (V + τ²)))``. A guardrail trips when
  ``Λ ≥ 1/α`` and ``d`` is on the wrong side of the bound ``θ₀``. Its probability of ever
  tripping while the true difference is within the bound is at most ``α`` however often it
  is looked at (Ville's inequality); power goes to 1 as turns accrue when the true difference
  is beyond the bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "Z95",
    "Estimate",
    "beyond_bound",
    "difference",
    "mean_estimate",
    "msprt",
    "rate_estimate",
]

#: The two-sided 95 % normal quantile.
Z95 = 1.959963984540054


@dataclass(frozen=True, slots=True)
class Estimate:
    """A value with its 95 % interval, the count it rests on and its standard error."""

    value: float | None
    low: float | None
    high: float | None
    n: int
    se: float | None

    def to_dict(self) -> dict[str, float | int | None]:
        return {"value": self.value, "low": self.low, "high": self.high, "n": self.n}


def rate_estimate(successes: int, n: int) -> Estimate:
    """The share ``successes / n`` with its Wilson score interval (``None`` values: ``n`` 0)."""
    if n <= 0:
        return Estimate(None, None, None, 0, None)
    p = successes / n
    z2 = Z95 * Z95
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return Estimate(
        p, max(0.0, centre - half), min(1.0, centre + half), n, math.sqrt(p * (1 - p) / n)
    )


def mean_estimate(mean: float | None, sd: float | None, n: int) -> Estimate:
    """A mean of ``n`` values with sample standard deviation ``sd`` and its normal interval."""
    if n <= 0 or mean is None:
        return Estimate(None, None, None, 0, None)
    se = (sd or 0.0) / math.sqrt(n) if n > 1 else None
    if se is None:
        return Estimate(mean, None, None, n, None)
    return Estimate(mean, mean - Z95 * se, mean + Z95 * se, n, se)


def difference(arm: Estimate, control: Estimate) -> dict[str, float | bool | None]:
    """``arm − control`` with its 95 % interval and whether it excludes 0."""
    if arm.value is None or control.value is None or arm.se is None or control.se is None:
        return {"value": None, "low": None, "high": None, "significant": False}
    d = arm.value - control.value
    se = math.sqrt(arm.se**2 + control.se**2)
    low, high = d - Z95 * se, d + Z95 * se
    return {"value": d, "low": low, "high": high, "significant": se > 0 and (low > 0 or high < 0)}


def msprt(d: float, variance: float, bound: float, tau: float) -> float:
    """The mSPRT statistic ``Λ`` for the difference ``d`` (variance ``variance``) against the
    bound ``θ₀ = bound`` with mixture standard deviation ``tau`` (module docstring)."""
    if variance <= 0:
        # No spread at all (every turn alike in both arms): any step beyond the bound is sure.
        return math.inf if d != bound else 1.0
    tau2 = tau * tau
    total = variance + tau2
    return math.sqrt(variance / total) * math.exp(tau2 * (d - bound) ** 2 / (2 * variance * total))


def beyond_bound(
    d: float, variance: float, bound: float, *, upper: bool, tau: float, alpha: float
) -> tuple[bool, float]:
    """Whether the one-sided guardrail trips — ``d`` past ``bound`` (above it when ``upper``)
    with ``Λ ≥ 1/α`` — and ``Λ``. The mixture is two-sided; requiring the side only makes
    tripping rarer, so the error rate stays at most ``alpha`` under continuous monitoring."""
    statistic = msprt(d, variance, bound, tau)
    past = d > bound if upper else d < bound
    return past and statistic >= 1 / alpha, statistic
