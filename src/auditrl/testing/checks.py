"""Named contract checks and how they fail: one `Check` per contract, a `ContractError` that says which broke.

Checks are plain callables, so a test suite can run them all at once (`run_checks`) or one test each
(`pytest.mark.parametrize("check", checks, ids=lambda c: c.id)`). They drive async designs and judges with
`asyncio.run`, so call them from a plain (not async) test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass


class ContractError(AssertionError):
    """A reward design or judge family breaks a contract; the message names which, which contract and how."""


@dataclass(frozen=True)
class Check:
    """One contract of one design or family: `id` names both, calling it runs it."""

    id: str
    run: Callable[[], None]

    def __call__(self) -> None:
        try:
            self.run()
        except ContractError as exc:
            raise ContractError(f"{self.id}: {exc}") from None
        except Exception as exc:
            raise ContractError(f"{self.id}: raised {type(exc).__name__}: {exc}") from exc


def run_checks(checks: Iterable[Check]) -> None:
    """Run every check; one ContractError lists every contract that broke."""
    failures: list[str] = []
    for check in checks:
        try:
            check()
        except ContractError as exc:
            failures.append(str(exc))
    if failures:
        raise ContractError(f"{len(failures)} contract(s) broken:\n- " + "\n- ".join(failures))


def expect(condition: bool, message: str) -> None:
    """Fail the running check with `message` unless `condition` holds."""
    if not condition:
        raise ContractError(message)
