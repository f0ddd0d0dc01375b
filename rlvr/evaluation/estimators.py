"""Sample-based accuracy estimators for n completions per problem: pass@k, maj@k, avg@k, and percentile
bootstrap confidence intervals over problems. All are exact expectations over the k-subsets of the n samples
(no Monte Carlo), stable for n in the thousands."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021, "Evaluating Large Language Models Trained on Code", eq. 1): the chance
    that a k-subset of n samples, c of them correct, holds a correct one: 1 - C(n-c, k) / C(n, k), computed as
    1 - prod_{i=n-c+1..n} (1 - k/i), which never forms the (overflowing) binomials."""
    _check(n, k)
    if not 0 <= c <= n:
        raise ValueError(f"correct count c={c} must be between 0 and n={n}")
    if n - c < k:
        return 1.0
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1, dtype=np.float64)))


def avg_at_k(n: int, c: int) -> float:
    """avg@k: the mean accuracy of k samples, whose expectation over k-subsets is c/n for every k."""
    return c / n


def majority_at_k(sizes: Sequence[int], correct: Sequence[bool], n: int, ks: Sequence[int]) -> dict[int, float]:
    """Expected maj@k for each k in `ks` (Wang et al. 2023, "Self-Consistency Improves Chain of Thought
    Reasoning"): the chance that the most frequent answer among a uniformly drawn k-subset of the n samples is
    a correct one; ties are broken uniformly at random.

    `sizes[j]` samples gave answer class j (`correct[j]` says whether it is right); the other
    n - sum(sizes) samples gave no answer and never win. With uniform tie priorities p,

        maj@k = sum_{j correct} sum_{t>=1} C(m_j, t) / C(n, k) * int_0^1 [x^(k-t)] F_t(x) prod_{i != j, m_i >= t}
                (sum_{u<t} C(m_i, u) x^u + p C(m_i, t) x^t) dp,

    where F_t = (1+x)^(samples in no class or in classes smaller than t). Class j wins with t votes when every
    other class has fewer, or t with a lower priority (probability p each). The integrand is a polynomial in p,
    integrated exactly by Gauss-Legendre quadrature; polynomial coefficients are kept as hypergeometric
    probabilities (counts over C(M, d)), so nothing overflows. One pass serves every k."""
    for k in ks:
        _check(n, k)
    if len(sizes) != len(correct) or sum(sizes) > n or any(m < 1 for m in sizes):
        raise ValueError(f"answer classes {list(sizes)} do not fit n={n} samples")
    if not ks:
        return {}
    log_comb = _LogComb(n)
    top = max(ks)
    totals = dict.fromkeys(ks, 0.0)
    for j, (m_j, right) in enumerate(zip(sizes, correct)):
        if not right:
            continue
        rest = n - m_j
        others = [m for i, m in enumerate(sizes) if i != j]
        for t in range(1, min(top, m_j) + 1):
            contenders = [m for m in others if m >= t]
            nodes, weights = _gauss_legendre_01(len(contenders) // 2 + 1)
            poly = weights @ _rest_polynomial(rest - sum(contenders), contenders, t, top - t, nodes, log_comb)
            for k in ks:
                if t <= k <= t + rest:
                    totals[k] += poly[k - t] * math.exp(log_comb(m_j, t) + log_comb(rest, k - t) - log_comb(n, k))
    return {k: float(min(1.0, v)) for k, v in totals.items()}


def _rest_polynomial(free: int, contenders: list[int], t: int, degree: int, nodes: np.ndarray,
                     log_comb: _LogComb) -> np.ndarray:
    """Coefficients up to x^degree of F_t(x) prod_i (A_i(x) + p C(m_i, t) x^t) at each node p, each divided by
    C(M, d) for the M = free + sum(contenders) samples: [len(nodes), degree + 1] probabilities."""
    poly = np.zeros((len(nodes), degree + 1))
    poly[:, : min(free, degree) + 1] = 1.0  # C(F, d) / C(F, d)
    size = free
    for m in contenders:
        new = np.zeros_like(poly)
        for u in range(min(t, m) + 1):
            d = np.arange(0, min(size, degree - u) + 1)
            if not len(d):
                break
            ratio = np.exp(log_comb(size, d) + log_comb(m, u) - log_comb(size + m, d + u))
            scale = nodes[:, None] if u == t else 1.0
            new[:, d + u] += poly[:, d] * ratio * scale
        poly, size = new, size + m
    return poly


class _LogComb:
    """log C(a, b) for integers 0 <= b <= a <= n, vectorized over b."""

    def __init__(self, n: int):
        self.log_fact = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, n + 1, dtype=np.float64)))])

    def __call__(self, a, b):
        return self.log_fact[a] - self.log_fact[b] - self.log_fact[np.subtract(a, b)]


def _gauss_legendre_01(points: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights integrating polynomials of degree <= 2 * points - 1 exactly on [0, 1]."""
    x, w = np.polynomial.legendre.leggauss(points)
    return (x + 1) / 2, w / 2


def bootstrap_ci(values: Sequence[float], confidence: float = 0.95, resamples: int = 1000,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean over problems (Efron & Tibshirani 1993, ch. 13), resampling
    problems with replacement with a fixed seed."""
    data = np.asarray(values, dtype=np.float64)
    if len(data) == 0:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), size=(resamples, len(data)))].mean(axis=1)
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def _check(n: int, k: int) -> None:
    if not 1 <= k <= n:
        raise ValueError(f"k={k} must be between 1 and the number of samples n={n}")
