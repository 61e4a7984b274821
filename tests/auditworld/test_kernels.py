"""The compiled reply of the simulation's step is the numpy `respond`, flag for flag, at its thresholds too."""

from __future__ import annotations

import numpy as np

from auditrl.auditworld import kernels
from auditrl.auditworld.targets import ACCUSATION_AWARENESS, AWARE_SUPPRESSION, MAX_CONFESSION, respond
from auditrl.auditworld.world import World

N = 6_000


def _inputs(world: World, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Episodes with the world's real family rates (float32, as the simulation keeps them), every framing and
    pressure, and uniforms of which a third sit exactly on a float32 rounding of a threshold the reply compares
    them with: where a float32 and a float64 product differ, these draws fall on different sides."""
    fams = world.families
    fam = rng.integers(0, len(fams.names), N)
    rates = np.column_stack(
        [
            rng.choice([0.0, 0.35, 0.7, 0.9], N) * fams.susceptibility[fam],
            fams.sycophancy[fam],
            fams.leak[fam],
            fams.eval_awareness[fam],
            fams.noise[fam],
            rng.integers(0, 3, N),
        ]
    ).astype(np.float32)
    u = rng.random((5, N), dtype=np.float32)
    edges = (
        np.float32(rng.choice([ACCUSATION_AWARENESS, AWARE_SUPPRESSION, MAX_CONFESSION, 0.5, 1.25, 1.5], N))
        * rates[np.arange(N), rng.integers(0, 5, N)]
    )
    on_edge = rng.random((4, N)) < 1 / 3
    u[:4] = np.where(on_edge, edges, u[:4])
    return {
        "rates": rates,
        "u": u,
        "triggered": rng.random(N) < 0.5,
        "onset_ok": rng.random(N) < 0.8,
        "framing": rng.integers(0, 3, N),
        "pressure": rng.integers(0, 3, N),
        "branch_pressure": rng.integers(0, 4, N).astype(np.float32),
        "aware": rng.random(N) < 0.3,
    }


def test_the_compiled_reply_gives_respond_s_flags_for_every_episode(world: World) -> None:
    x = _inputs(world, np.random.default_rng(7))
    rates, u = x["rates"], x["u"]
    expected = respond(
        triggered=x["triggered"], onset_ok=x["onset_ok"], rate=rates[:, 0], sycophancy=rates[:, 1],
        leak=rates[:, 2], eval_awareness=rates[:, 3], noise=rates[:, 4], framing=x["framing"],
        pressure=x["pressure"], branch_pressure=x["branch_pressure"], aware=x["aware"], u=u.T,
    )  # fmt: skip
    got = np.array(
        [
            kernels.reply(
                bool(x["triggered"][i]),
                bool(x["onset_ok"][i]),
                rates,
                i,
                int(x["framing"][i]),
                int(x["pressure"][i]),
                x["branch_pressure"][i],
                bool(x["aware"][i]),
                u,
                i,
            )  # fmt: skip
            for i in range(N)
        ]
    )
    names = ("expressed", "confession", "eval_aware", "denial", "odd", "aware")
    for column, name in enumerate(names):
        assert np.array_equal(got[:, column], getattr(expected, name)), name
    assert all(getattr(expected, name).any() for name in names)  # every flag was drawn somewhere
