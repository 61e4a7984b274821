"""Chat templates shipped with auditrl, for tokenizers whose own template cannot render a multi-turn audit."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

FOLDER = "data/chat_templates"


def shipped_chat_templates() -> list[str]:
    """Names of the chat templates packaged in auditrl/models/data/chat_templates."""
    folder = resources.files("auditrl.models").joinpath(FOLDER)
    return sorted(f.name.removesuffix(".jinja") for f in folder.iterdir() if f.name.endswith(".jinja"))


def chat_template_text(spec: str) -> str:
    """The Jinja text of a shipped template name or of a template file."""
    if spec in shipped_chat_templates():
        return resources.files("auditrl.models").joinpath(f"{FOLDER}/{spec}.jinja").read_text("utf-8")
    return Path(spec).read_text(encoding="utf-8")
