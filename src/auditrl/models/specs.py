"""Model specs of the form `<provider>/<model>`, checked against the providers inspect-ai knows, so that a config
naming a target, a judge or a teacher fails on a typo before any model loads."""

from __future__ import annotations

import functools

from auditrl.configfile import did_you_mean


@functools.cache
def _providers() -> tuple[str, ...]:
    # inspect-ai takes about a second to import, so only configs that name a model spec pay for it
    from auditrl.models.roles import supported_providers

    return tuple(supported_providers())


def check_model_spec(spec: str, what: str) -> str:
    """A `<provider>/<model>` spec whose provider inspect-ai knows; raises ValueError naming `what`."""
    provider, sep, model = spec.partition("/")
    if not sep or not provider or not model:
        raise ValueError(f"{what} {spec!r} is not a model spec of the form <provider>/<model>")
    known = list(_providers())
    if provider not in known:
        raise ValueError(
            f"{what} {spec!r} names unknown model provider {provider!r}{did_you_mean(provider, known)}; "
            f"supported providers: {', '.join(known)}"
        )
    return spec
