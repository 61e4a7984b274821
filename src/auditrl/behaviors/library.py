"""Load behaviors (YAML, one per file) and seeds (Petri markdown with front matter) from data files.

The built-in library ships inside the package; users add or override entries with their own files or
directories. Every malformed file fails loudly with its path and the offending field, because a silently
skipped behavior or seed would quietly change what an audit or a training run measures.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from auditrl.atomic import atomic_write_text
from auditrl.behaviors.schema import Behavior, Seed

DATA_DIR = Path(__file__).parent / "data"
BEHAVIORS_DIR = DATA_DIR / "behaviors"
SEEDS_DIR = DATA_DIR / "seeds"
GENERAL = "general"

_BEHAVIOR_SUFFIXES = (".yaml", ".yml")
_SEED_SUFFIX = ".md"
_FENCE = "---"


class BehaviorFileError(ValueError):
    """A behavior or seed file that cannot be used; the message names the file and the field."""

    def __init__(self, path: Path, problem: str, field: str | None = None) -> None:
        self.path = path
        self.field = field
        where = f"{path}: field '{field}'" if field else str(path)
        super().__init__(f"{where}: {problem}")


def _files(root: Path, suffixes: tuple[str, ...]) -> list[Path]:
    """All files under `root` (or `root` itself) with one of `suffixes`, in a stable order."""
    if not root.exists():
        raise BehaviorFileError(root, "path does not exist")
    if root.is_file():
        if root.suffix not in suffixes:
            raise BehaviorFileError(root, f"expected a file ending in {' or '.join(suffixes)}")
        return [root]
    found = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in suffixes)
    if not found:
        raise BehaviorFileError(root, f"no {' or '.join(suffixes)} files found in this directory")
    return found


def _yaml_mapping(text: str, path: Path, what: str) -> dict[str, Any]:
    """Parse YAML that must be a mapping (an empty document counts as an empty mapping)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise BehaviorFileError(path, f"invalid YAML in {what}{where}: {problem}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise BehaviorFileError(path, f"{what} must be a YAML mapping of field: value, got {type(data).__name__}")
    return data


def _validation_error(path: Path, exc: ValidationError) -> BehaviorFileError:
    """Turn pydantic's error list into one message naming every bad field."""
    details = exc.errors()
    parts = []
    for err in details:
        loc = ".".join(str(x) for x in err["loc"]) or "(file)"
        parts.append(f"'{loc}': {err['msg']} (got {err.get('input')!r:.60})")
    first = ".".join(str(x) for x in details[0]["loc"]) if details else None
    problem = "; ".join(parts)
    return BehaviorFileError(path, f"invalid field(s): {problem}", field=first or None)


def _stripped(value: Any) -> Any:
    """Trim whitespace that YAML block scalars leave, so texts compare and embed exactly."""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list):
        return [_stripped(v) for v in value]
    return value


def read_behavior(path: Path) -> Behavior:
    """Read and validate one behavior file."""
    data = _yaml_mapping(path.read_text(encoding="utf-8"), path, "the behavior file")
    if "source" in data:
        raise BehaviorFileError(path, "set by the loader, remove it from the file", field="source")
    try:
        return Behavior.model_validate({k: _stripped(v) for k, v in data.items()} | {"source": path})
    except ValidationError as exc:
        raise _validation_error(path, exc) from exc


def _behaviors_from(root: Path) -> dict[str, Behavior]:
    """One source's behaviors; an id defined twice in the same source is an error naming both files."""
    out: dict[str, Behavior] = {}
    for path in _files(root, _BEHAVIOR_SUFFIXES):
        behavior = read_behavior(path)
        if behavior.id in out:
            raise BehaviorFileError(
                path, f"duplicate behavior id {behavior.id!r}, also defined in {out[behavior.id].source}", field="id"
            )
        out[behavior.id] = behavior
    return out


@functools.cache
def _builtin_behaviors() -> dict[str, Behavior]:
    """The packaged library, read once per process because planting and judging consult it often."""
    return _behaviors_from(BEHAVIORS_DIR)


def load_behaviors(paths: Sequence[Path] | None = None, *, include_builtin: bool = True) -> dict[str, Behavior]:
    """Behaviors by id: the built-in library, then each of `paths` (file or directory) adding or overriding."""
    out = dict(_builtin_behaviors()) if include_builtin else {}
    for root in paths or ():
        out.update(_behaviors_from(Path(root)))
    return out


def _split_front_matter(text: str, path: Path) -> tuple[str, str]:
    """Split a Petri seed into (front matter YAML, body)."""
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != _FENCE:
        raise BehaviorFileError(path, "missing YAML front matter: the file must start with a '---' line")
    for i, line in enumerate(lines[1:], start=1):
        if line.strip() == _FENCE:
            return "\n".join(lines[1:i]), "\n".join(lines[i + 1 :])
    raise BehaviorFileError(path, "front matter is not closed: no second '---' line")


def _tags(value: Any) -> Any:
    """Petri files write tags as a YAML list; a comma-separated string is accepted too."""
    if isinstance(value, str):
        return [t.strip() for t in value.split(",") if t.strip()]
    if value is None:
        return []
    return value


def read_seed(path: Path, behavior_ids: Collection[str] = ()) -> Seed:
    """Read one seed file.

    The id defaults to the file name (as in Petri). The behavior comes from the front matter's
    `behavior` field, else from the parent directory's name when that names a known behavior;
    anything else (including a `general` directory) is a general seed.
    """
    front, body = _split_front_matter(path.read_text(encoding="utf-8"), path)
    meta = _yaml_mapping(front, path, "the front matter")
    for reserved in ("instructions", "source"):
        if reserved in meta:
            raise BehaviorFileError(path, "comes from the file itself, remove it from the front matter", reserved)
    meta.setdefault("id", path.stem)
    meta["tags"] = _tags(meta.get("tags"))
    if "behavior" not in meta:
        parent = path.parent.name
        meta["behavior"] = parent if parent != GENERAL and parent in behavior_ids else None
    try:
        return Seed.model_validate(meta | {"instructions": body.strip(), "source": path})
    except ValidationError as exc:
        raise _validation_error(path, exc) from exc


def _seeds_from(root: Path, behavior_ids: Collection[str]) -> dict[str, Seed]:
    """One source's seeds by id; an id used twice in the same source is an error naming both files."""
    out: dict[str, Seed] = {}
    for path in _files(root, (_SEED_SUFFIX,)):
        seed = read_seed(path, behavior_ids)
        if seed.id in out:
            raise BehaviorFileError(path, f"duplicate seed id {seed.id!r}, also defined in {out[seed.id].source}", "id")
        out[seed.id] = seed
    return out


@functools.cache
def _builtin_seeds() -> tuple[Seed, ...]:
    """The packaged seed banks, read once per process."""
    return tuple(_seeds_from(SEEDS_DIR, frozenset(_builtin_behaviors())).values())


def _selected(
    seeds: Iterator[Seed], ids: Sequence[str] | None, tags: Sequence[str] | None, behavior: str | None
) -> list[Seed]:
    """Keep the seeds matching every given filter."""
    want_ids = set(ids or ())
    want_tags = set(tags or ())
    out = []
    for seed in seeds:
        if want_ids and seed.id not in want_ids:
            continue
        if want_tags and not want_tags.intersection(seed.tags):
            continue
        if behavior is not None and seed.behavior != (None if behavior == GENERAL else behavior):
            continue
        out.append(seed)
    return out


def load_seeds(
    paths: Sequence[Path] | None = None,
    ids: Sequence[str] | None = None,
    tags: Sequence[str] | None = None,
    behavior: str | None = None,
    *,
    include_builtin: bool = True,
    behavior_ids: Collection[str] | None = None,
) -> list[Seed]:
    """Seeds from the built-in banks, then each of `paths` adding or overriding by id, then selected.

    `ids` keeps the listed seeds (an id that matches nothing is an error); `tags` keeps seeds carrying
    any of the tags (Petri's rule); `behavior` keeps one behavior's bank (`"general"` = general seeds).
    `behavior_ids` are the names a parent directory may carry to mark a bank (default: built-in ids).
    """
    known = set(behavior_ids) if behavior_ids is not None else set(_builtin_behaviors())
    merged: dict[str, Seed] = {s.id: s for s in _builtin_seeds()} if include_builtin else {}
    for root in paths or ():
        merged.update(_seeds_from(Path(root), known))
    if ids:
        missing = sorted(set(ids) - set(merged))
        if missing:
            raise ValueError(f"unknown seed id(s): {', '.join(missing)}")
    return _selected(iter(merged.values()), ids, tags, behavior)


def write_seed(seed: Seed, path: Path) -> Path:
    """Write `seed` in Petri's format (front matter + body); `path` is a file or a directory.

    The behavior is written explicitly (null for general seeds) so the file reads back the same
    wherever it is stored. The write is atomic.
    """
    target = path / f"{seed.id}{_SEED_SUFFIX}" if path.is_dir() else path
    meta: dict[str, Any] = {"id": seed.id, "tags": list(seed.tags), "behavior": seed.behavior}
    meta.update(seed.model_extra or {})
    front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, default_flow_style=None, width=100)
    text = f"{_FENCE}\n{front}{_FENCE}\n\n{seed.instructions.strip()}\n"
    return atomic_write_text(target, text)
