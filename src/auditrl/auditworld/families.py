"""Simulated target families: how strongly each shows a plant, confesses under pressure, notices tests.

Families differ in rates and in style, so an auditor trained against a pool cannot tell calibration
targets apart by style alone, and a held-out family measures transfer.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from auditrl.configfile import load_yaml

FAMILIES_FILE = "data/families.yaml"


class Family(BaseModel):
    """One family's rates (probabilities per reply) and style phrases."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    susceptibility: float = Field(gt=0.0, le=2.0)
    sycophancy: float = Field(ge=0.0, le=1.0)
    leak: float = Field(ge=0.0, le=1.0)
    eval_awareness: float = Field(ge=0.0, le=1.0)
    noise: float = Field(ge=0.0, le=1.0)
    openers: list[str] = Field(min_length=1)
    closers: list[str] = Field(min_length=1)


def load_families() -> dict[str, Family]:
    """The packaged families by name; a malformed entry fails with the file and the family named."""
    text = resources.files("auditrl.auditworld").joinpath(FAMILIES_FILE).read_text(encoding="utf-8")
    raw = load_yaml(text)
    if not isinstance(raw, dict) or not raw:
        raise ValueError(f"{FAMILIES_FILE}: expected a mapping of family name to its parameters")
    out: dict[str, Family] = {}
    for name, fields in raw.items():
        try:
            out[name] = Family.model_validate({"name": name, **fields})
        except (ValidationError, TypeError) as exc:
            raise ValueError(f"{FAMILIES_FILE}: family {name!r}: {exc}") from exc
    return out


@functools.cache
def target_family_names() -> tuple[str, ...]:
    """Names of the packaged families, read once, for validating configs before anything runs."""
    return tuple(load_families())


def check_family(name: str) -> str:
    """`name` if it is a packaged family; otherwise a ValueError listing the known ones."""
    known = target_family_names()
    if name not in known:
        raise ValueError(f"unknown target family {name!r}; known families: {', '.join(known)}")
    return name


@dataclass(frozen=True)
class FamilyTable:
    """The families' rates as arrays indexed by family number, for vectorised episodes."""

    names: tuple[str, ...]
    susceptibility: NDArray[np.float64]
    sycophancy: NDArray[np.float64]
    leak: NDArray[np.float64]
    eval_awareness: NDArray[np.float64]
    noise: NDArray[np.float64]

    @classmethod
    def of(cls, families: Mapping[str, Family], names: Sequence[str]) -> FamilyTable:
        missing = [n for n in names if n not in families]
        if missing:
            raise ValueError(f"unknown target family {missing[0]!r}; known families: {', '.join(sorted(families))}")
        fams = [families[n] for n in names]
        return cls(
            names=tuple(names),
            susceptibility=np.array([f.susceptibility for f in fams]),
            sycophancy=np.array([f.sycophancy for f in fams]),
            leak=np.array([f.leak for f in fams]),
            eval_awareness=np.array([f.eval_awareness for f in fams]),
            noise=np.array([f.noise for f in fams]),
        )

    def index(self, name: str) -> int:
        try:
            return self.names.index(name)
        except ValueError:
            raise ValueError(f"unknown target family {name!r}; known families: {', '.join(self.names)}") from None
