import math

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from auditrl.stats import auc_change_ci, auc_ci, composite_ci, mean_ci


def test_mean_ci_brackets_mean_and_drops_nan() -> None:
    e = mean_ci([1.0, 2.0, 3.0, 4.0, float("nan")])
    assert e.n == 4 and e.mean == 2.5
    assert e.lo <= 2.5 <= e.hi and e.lo >= 1.0 and e.hi <= 4.0


def test_composite_is_unweighted_mean_of_metric_means() -> None:
    a, b = [10.0, 20.0, 30.0], [100.0, 100.0, 90.0, 90.0, 95.0]
    e = composite_ci([a, b])
    assert math.isclose(e.mean, (20.0 + 95.0) / 2)
    assert e.lo <= e.mean <= e.hi and e.n == 8
    assert e.hi - e.lo < mean_ci(a).hi - mean_ci(a).lo  # averaging with a tighter metric narrows the interval


def test_composite_skips_empty_metrics_and_is_deterministic() -> None:
    assert composite_ci([[50.0], [], [float("nan")]]).mean == 50.0
    assert np.isnan(composite_ci([[], []]).mean)
    assert composite_ci([[1.0, 5.0], [2.0, 9.0]], seed=3) == composite_ci([[1.0, 5.0], [2.0, 9.0]], seed=3)


def test_auc_matches_sklearn_and_halves_ties() -> None:
    rng = np.random.default_rng(1)
    x, y = rng.normal(0.5, 1, 40).round(1), rng.normal(0, 1, 50).round(1)
    e = auc_ci(x, y)
    assert math.isclose(e.mean, 100 * roc_auc_score([1] * 40 + [0] * 50, np.r_[x, y]))
    assert e.lo < e.mean < e.hi and e.n == 90
    assert auc_ci([1.0, 1.0], [1.0]).mean == 50.0
    assert auc_ci([2.0, 3.0], [1.0]).mean == 100.0


def test_auc_intervals_are_the_quantiles_of_each_resample_scored_on_its_own() -> None:
    """The bootstrap ranks all its resamples at once; each must score as sklearn scores that resample alone."""
    rng = np.random.default_rng(2)
    x, y = rng.normal(0.5, 1, 12).round(1), rng.normal(0, 1, 9).round(1)
    draws = np.random.default_rng(0)
    boots = []
    for _ in range(300):
        i, j = draws.integers(0, x.size, x.size), draws.integers(0, y.size, y.size)
        boots.append(100 * roc_auc_score([1] * x.size + [0] * y.size, np.r_[x[i], y[j]]))
    e = auc_ci(x, y, n_boot=300, seed=0)
    assert np.allclose([e.lo, e.hi], np.quantile(boots, [0.025, 0.975]), rtol=0, atol=1e-9)


def test_auc_ignores_a_shift_of_every_score_that_a_rate_difference_reads() -> None:
    """Scores all scaled down keep their order: the AUC change is exactly 0 although the gap of the means shrinks."""
    rng = np.random.default_rng(2)
    x, y = rng.uniform(0.3, 0.9, 30), rng.uniform(0.1, 0.7, 30)
    change = auc_change_ci((x / 10, x), (y / 10, y))
    assert change.mean == 0.0 and change.lo == 0.0 and change.hi == 0.0
    assert (x / 10).mean() - (y / 10).mean() < x.mean() - y.mean()


def test_auc_change_is_paired_and_refuses_unpaired_scores() -> None:
    rng = np.random.default_rng(3)
    x, y = rng.normal(0, 1, 30), rng.normal(0, 1, 30)
    better = auc_change_ci((x + 1.0, x), (y, y))
    assert better.mean > 0 and better.lo > 0
    with pytest.raises(ValueError, match="paired"):
        auc_change_ci((x, x[:5]), (y, y))
