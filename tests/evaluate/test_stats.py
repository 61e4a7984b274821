import math

import numpy as np

from auditrl.evaluate.stats import composite_ci, mean_ci


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
