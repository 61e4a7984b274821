"""The documentation site builds with `mkdocs build --strict` (no broken link or anchor, no page left out of the nav),
and its references are generated from the code: every command, every config field, the extension points' API."""

from __future__ import annotations

import html
import importlib.util
import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from auditrl.auditworld.job.config import AuditWorldConfig
from auditrl.cli import COMMANDS
from auditrl.experiments.small_lm.settings import SmallLMSettings
from auditrl.train.config import GRPOLMConfig

ROOT = Path(__file__).resolve().parents[1]
GUIDES = {"index.md", "training_step.md", "petri.md"}
"""Pages at the top of docs/ that are not results files."""
RESULTS_FILES = sorted(p for p in (ROOT / "docs").glob("*.md") if p.name not in GUIDES)
APPENDIX = ROOT / "docs" / "experiments" / "small_lm_runs.md"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site as `mkdocs build --strict` builds it, run in this process as that command runs it: a child process
    imported torch, inspect-ai and the CLI again for the hook (about half of the build's 10 CPU-s)."""
    from mkdocs.commands.build import build
    from mkdocs.config import load_config
    from mkdocs.exceptions import Abort

    out = tmp_path_factory.mktemp("site")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NO_MKDOCS_2_WARNING", "1")
        patch.chdir(ROOT)
        config = load_config(config_file=str(ROOT / "mkdocs.yml"), strict=True, site_dir=str(out))
        config.plugins.on_startup(command="build", dirty=False)
        try:
            build(config)
        except Abort as refused:  # strict: a warning (broken link or anchor, page out of the nav) fails the build
            pytest.fail(f"mkdocs build --strict failed: {refused}")
        finally:
            config.plugins.on_shutdown()
    return out


def text_of(page: Path) -> str:
    """A built page's visible text: inline tags dropped, the others a space, entities decoded."""
    inline = re.sub(r"</?(?:code|em|strong|a|span)\b[^>]*>", "", page.read_text(encoding="utf-8"))
    return html.unescape(re.sub(r"<[^>]+>", " ", inline))


def words(text: str) -> str:
    """Text compared as its characters: code marks and whitespace dropped (markdown trims a code span's spaces)."""
    return "".join(text.replace("`", "").split())


def fields(model: type[BaseModel], prefix: str = "") -> list[tuple[str, str]]:
    """Every field's dotted path and description, nested models included (each under the first path reaching it)."""
    paths: list[tuple[str, str]] = []
    seen: set[type[BaseModel]] = set()
    queue: list[tuple[str, type[BaseModel]]] = [(prefix, model)]
    while queue:
        path, current = queue.pop(0)
        if current in seen:
            continue
        seen.add(current)
        for name, field in current.model_fields.items():
            if field.exclude:
                continue
            key = f"{path}.{name}" if path else name
            paths.append((key, field.description or ""))
            queue += [(key, m) for m in nested_models(field.annotation)]
    return paths


def nested_models(annotation: object) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in getattr(annotation, "__args__", ()) for m in nested_models(a)]


def test_the_cli_reference_has_every_command_and_option(site: Path) -> None:
    text = text_of(site / "reference" / "cli" / "index.html")
    for name in COMMANDS:
        assert f"auditrl {name}" in text, f"the CLI reference lacks auditrl {name}"
    assert "auditrl judge score" in text and "auditrl crux build" in text, "subcommands of a group are listed"
    assert "--on-existing" in text and "--random-seed" in text and "--judge-cache" in text


@pytest.mark.parametrize(
    ("page", "model"), [("grpo_lm", GRPOLMConfig), ("auditworld", AuditWorldConfig), ("experiments", SmallLMSettings)]
)
def test_the_config_reference_has_every_field_with_its_description(
    site: Path, page: str, model: type[BaseModel]
) -> None:
    text = words(text_of(site / "reference" / "config" / page / "index.html"))
    missing = [path for path, description in fields(model) if path not in text or words(description) not in text]
    assert missing == [], f"the {page} config reference lacks these fields or their descriptions: {missing}"


def test_the_extension_points_are_documented_from_their_docstrings(site: Path) -> None:
    rewards = text_of(site / "reference" / "api" / "rewards" / "index.html")
    assert "Register the builder of a reward design" in " ".join(rewards.split())
    judges = text_of(site / "reference" / "api" / "judges" / "index.html")
    assert "Register a judge family" in " ".join(judges.split())
    providers = text_of(site / "reference" / "api" / "providers" / "index.html")
    assert "resolve_model" in providers


def test_the_home_page_is_the_readme_with_its_links_made_relative(site: Path) -> None:
    home = (site / "index.html").read_text(encoding="utf-8")
    assert "Auditing real models" in home and 'href="docs/' not in home


def test_results_files_open_with_their_conclusion_and_stay_short() -> None:
    for path in [*RESULTS_FILES, ROOT / "docs" / "experiments" / "small_lm.md"]:
        lines = path.read_text(encoding="utf-8").splitlines()
        assert len(lines) <= 400 or path == APPENDIX, f"{path.name}: {len(lines)} lines (at most 400)"
        first = next(line for line in lines[1:] if line.strip())
        assert first.startswith("**Conclusion.**"), f"{path.name} does not open with its conclusion"


def test_the_hook_documents_any_typer_app_a_page_names() -> None:
    """`<!-- cli-reference: module:app -->` renders another typer app (an experiment's command line) the same way."""
    spec = importlib.util.spec_from_file_location("docs_reference_hook", ROOT / "docs" / "hooks" / "reference.py")
    assert spec is not None and spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    marker = "<!-- cli-reference: auditrl.cli.judge:app | auditrl judge -->"
    page = hook.on_page_markdown(f"# CLI\n\n{marker}\n", page=None, config=None, files=None)
    assert "### `auditrl judge score`" in page and "### `auditrl judge pairwise`" in page and "| `--design` |" in page
    assert "<!--" not in page
