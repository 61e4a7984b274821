"""Load behaviors (YAML, one per file) and seeds (Petri markdown with front matter) from data files.

The built-in library ships inside the package; users add or override entries with their own files or
directories. Every malformed file fails loudly with its path and the offending field (all of them in one
error, so a directory is fixed in one pass), because a silently skipped behavior or seed would quietly
change what an audit or a training run measures. For the same reason a seed naming an unknown behavior
is an error, and a user file that replaces an entry by id is reported as an `OverrideWarning`.

Files are read bounded and strict (auditrl.configfile: size and nesting limits, no duplicate keys).
Extensions match whatever their case (`x.YAML` is a behavior file); the other files of a directory are
skipped and named in one `SkippedFilesWarning`. Seed front matter may carry Petri's own metadata keys,
but a key that is a near miss of a known one (`behaviour:`, `tag:`) is an error with a did-you-mean.
"""

from __future__ import annotations

import difflib
import functools
import warnings
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import ValidationError

from auditrl.atomic import atomic_write_text
from auditrl.behaviors.schema import Behavior, Seed
from auditrl.configfile import load_yaml, yaml_problem
from auditrl.reading import BEHAVIOR, SEED, FileKind, FileReadError, read_text
from auditrl.safe_text import short_repr

DATA_DIR = Path(__file__).parent / "data"
BEHAVIORS_DIR = DATA_DIR / "behaviors"
SEEDS_DIR = DATA_DIR / "seeds"
GENERAL = "general"

_BEHAVIOR_SUFFIXES = (".yaml", ".yml")
_SEED_SUFFIX = ".md"
_SEED_KEYS = ("id", "tags", "behavior")
"""The front matter keys auditrl reads; any other key is kept as the seed's metadata (Petri's own keys)."""
_FENCE = "---"


class BehaviorFileError(ValueError):
    """A behavior or seed file that cannot be used; the message names the file and the field (once)."""

    def __init__(self, path: Path, problem: str, field: str | None = None) -> None:
        self.path = path
        self.field = field
        self.problem = problem
        self.errors: list[BehaviorFileError] = [self]
        where = f"{path}: field '{field}'" if field else str(path)
        super().__init__(f"{where}: {problem}")


class BehaviorFileErrors(BehaviorFileError):
    """Every problem found in one load, so a user fixes a directory of files in one pass, not one per run.

    `path` and `field` are the first problem's; `errors` holds each problem with its own file and field.
    """

    def __init__(self, errors: Sequence[BehaviorFileError]) -> None:
        flat = [e for err in errors for e in err.errors]
        first = flat[0]
        super().__init__(first.path, first.problem, first.field)
        self.errors = flat
        lines = "\n".join(f"  - {e.args[0]}" for e in flat)
        files = len({e.path for e in flat})
        self.args = (f"{len(flat)} problems in {files} behavior or seed file(s):\n{lines}",)


class LibraryNote(UserWarning):
    """Something loading did that the user should hear of (the CLI prints each as a note)."""


class OverrideWarning(LibraryNote):
    """A user file replaced a behavior or seed by id: allowed, but reported so it is never a surprise."""


class SkippedFilesWarning(LibraryNote):
    """Files of a behaviors or seeds directory that were not read (another extension, hidden): named once."""


def suggestion(name: str, known: Collection[str]) -> str:
    """A ' (did you mean: ...?)' hint for a mistyped id, or '' when nothing is close."""
    close = difflib.get_close_matches(name, sorted(known), n=3)
    return f" (did you mean: {', '.join(close)}?)" if close else ""


def _combined(errors: Sequence[BehaviorFileError]) -> BehaviorFileError:
    """One exception for all `errors`: the error itself when there is only one."""
    return errors[0] if len(errors) == 1 and len(errors[0].errors) == 1 else BehaviorFileErrors(errors)


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def _files(root: Path, suffixes: tuple[str, ...]) -> list[Path]:
    """All files under `root` (or `root` itself) ending in one of `suffixes` in any case, in a stable order;
    the other files of a directory are named in a SkippedFilesWarning (hidden ones, e.g. .DS_Store, silently)."""
    wanted = " or ".join(suffixes)
    try:
        if not root.exists():
            raise BehaviorFileError(root, "path does not exist")
        if root.is_file():
            if root.suffix.lower() not in suffixes:
                raise BehaviorFileError(root, f"expected a file ending in {wanted}")
            return [root]
        found: list[Path] = []
        skipped: list[Path] = []
        for path in sorted(p for p in root.rglob("*") if p.is_file() and not _hidden(p, root)):
            (found if path.suffix.lower() in suffixes else skipped).append(path)
    except OSError as exc:  # a name too long for the file system, a folder that cannot be listed
        raise BehaviorFileError(root, f"cannot be read ({exc.strerror or type(exc).__name__})") from None
    if skipped:
        names = ", ".join(str(p.relative_to(root)) for p in skipped[:10]) + (", ..." if len(skipped) > 10 else "")
        warnings.warn(
            f"{root}: skipped {len(skipped)} file(s) not ending in {wanted}: {names}", SkippedFilesWarning, stacklevel=5
        )
    if not found:
        raise BehaviorFileError(root, f"no {wanted} files found in this directory")
    return found


def _yaml_mapping(text: str, path: Path, what: str) -> dict[str, Any]:
    """Parse YAML that must be a mapping (an empty document counts as an empty mapping)."""
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        raise BehaviorFileError(path, f"invalid YAML in {what}: {yaml_problem(exc)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise BehaviorFileError(path, f"{what} must be a YAML mapping of field: value, got {type(data).__name__}")
    return data


def _validation_error(path: Path, exc: ValidationError) -> BehaviorFileError:
    """Turn pydantic's error list into one problem per bad field, each naming its field once."""
    problems = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"]) or None
        got = "" if err["type"] == "missing" else f" (got {short_repr(err.get('input'))})"
        problems.append(BehaviorFileError(path, f"{err['msg']}{got}", field=loc))
    return _combined(problems) if problems else BehaviorFileError(path, str(exc))


def _stripped(value: Any) -> Any:
    """Trim whitespace that YAML block scalars leave, so texts compare and embed exactly."""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list):
        return [_stripped(v) for v in value]
    return value


def _read_text(path: Path, kind: FileKind) -> str:
    """A library file's text, bounded by `kind`'s size limit; one that is not UTF-8 text or cannot be read is
    a file error, not a crash."""
    try:
        return read_text(path, kind)
    except FileReadError as exc:
        raise BehaviorFileError(path, str(exc).removeprefix(f"{path}: ")) from None


def read_behavior(path: Path) -> Behavior:
    """Read and validate one behavior file."""
    data = _yaml_mapping(_read_text(path, BEHAVIOR), path, "the behavior file")
    if "source" in data:
        raise BehaviorFileError(path, "set by the loader, remove it from the file", field="source")
    try:
        return Behavior.model_validate({k: _stripped(v) for k, v in data.items()} | {"source": path})
    except ValidationError as exc:
        raise _validation_error(path, exc) from exc


def _behaviors_from(root: Path, errors: list[BehaviorFileError]) -> dict[str, Behavior]:
    """One source's good behaviors; problems (bad files, an id defined twice) go to `errors`."""
    out: dict[str, Behavior] = {}
    try:
        paths = _files(root, _BEHAVIOR_SUFFIXES)
    except BehaviorFileError as exc:
        errors.append(exc)
        return out
    for path in paths:
        try:
            behavior = read_behavior(path)
        except BehaviorFileError as exc:
            errors.append(exc)
            continue
        if behavior.id in out:
            errors.append(
                BehaviorFileError(
                    path,
                    f"duplicate behavior id {short_repr(behavior.id)}, also defined in {out[behavior.id].source}",
                    "id",
                )
            )
            continue
        out[behavior.id] = behavior
    return out


def _override_notice(kind: str, item_id: str, path: Path | None, previous: Path | None, builtin: bool) -> str:
    """The sentence reported when a user file replaces an entry with the same id."""
    if builtin:
        return f"user file {path} overrides built-in {kind} {item_id}"
    return f"user file {path} overrides {kind} {item_id} from {previous}"


def _warn_overrides(notices: Sequence[str]) -> None:
    """Emit each override notice as an `OverrideWarning` (the CLI prints them; libraries may filter)."""
    for notice in notices:
        warnings.warn(notice, OverrideWarning, stacklevel=4)


Item = TypeVar("Item", Behavior, Seed)


def _merge_user_files(
    kind: str,
    builtin: dict[str, Item],
    paths: Sequence[Path] | None,
    read: Callable[[Path, list[BehaviorFileError]], dict[str, Item]],
) -> dict[str, Item]:
    """Built-ins, then each path's items by id; all bad files raise together, overrides are reported."""
    merged = dict(builtin)
    errors: list[BehaviorFileError] = []
    notices: list[str] = []
    for root in paths or ():
        for item_id, item in read(Path(root), errors).items():
            if item_id in merged:
                is_builtin = builtin.get(item_id) is merged[item_id]
                notices.append(_override_notice(kind, item_id, item.source, merged[item_id].source, is_builtin))
            merged[item_id] = item
    if errors:
        raise _combined(errors)
    _warn_overrides(notices)
    return merged


@functools.cache
def _builtin_behaviors() -> dict[str, Behavior]:
    """The packaged library, read once per process because planting and judging consult it often."""
    errors: list[BehaviorFileError] = []
    found = _behaviors_from(BEHAVIORS_DIR, errors)
    if errors:
        raise _combined(errors)
    return found


def load_behaviors(paths: Sequence[Path] | None = None, *, include_builtin: bool = True) -> dict[str, Behavior]:
    """Behaviors by id: the built-in library, then each of `paths` (file or directory) adding or overriding.

    Every bad file in every path is reported in one `BehaviorFileError`; each override of an id loaded
    earlier (built-in or from an earlier path) is reported as an `OverrideWarning`.
    """
    builtin = _builtin_behaviors() if include_builtin else {}
    return _merge_user_files("behavior", builtin, paths, _behaviors_from)


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


def read_seed(path: Path, behavior_ids: Collection[str] | None = None) -> Seed:
    """Read one seed file.

    The id defaults to the file name (as in Petri). The behavior comes from the front matter's
    `behavior` field, else from the parent directory's name when that names a known behavior;
    anything else (including a `general` directory, or `behavior: general`) is a general seed.
    `behavior_ids` are the known behaviors (default: the built-in library); a `behavior` field naming
    none of them is an error, since such a seed would silently never be selected for any audit.
    """
    known = set(_builtin_behaviors()) if behavior_ids is None else set(behavior_ids)
    front, body = _split_front_matter(_read_text(path, SEED), path)
    meta = _yaml_mapping(front, path, "the front matter")
    for reserved in ("instructions", "source"):
        if reserved in meta:
            raise BehaviorFileError(path, "comes from the file itself, remove it from the front matter", reserved)
    for key in meta:
        close = difflib.get_close_matches(str(key).lower(), _SEED_KEYS, n=1, cutoff=0.7)
        if key not in _SEED_KEYS and close:
            raise BehaviorFileError(path, f"unknown front matter key (did you mean {close[0]!r}?)", str(key))
    meta.setdefault("id", path.stem)
    meta["tags"] = _tags(meta.get("tags"))
    if "behavior" not in meta:
        parent = path.parent.name
        meta["behavior"] = parent if parent != GENERAL and parent in known else None
    elif meta["behavior"] == GENERAL:
        meta["behavior"] = None
    try:
        seed = Seed.model_validate(meta | {"instructions": body.strip(), "source": path})
    except ValidationError as exc:
        raise _validation_error(path, exc) from exc
    if seed.behavior is not None and seed.behavior not in known:
        hint = suggestion(seed.behavior, known) or " (not a built-in or user behavior id)"
        raise BehaviorFileError(path, f"unknown behavior {short_repr(seed.behavior)}{hint}", field="behavior")
    return seed


def _seeds_from(root: Path, behavior_ids: Collection[str], errors: list[BehaviorFileError]) -> dict[str, Seed]:
    """One source's good seeds by id; problems (bad files, an id used twice) go to `errors`."""
    out: dict[str, Seed] = {}
    try:
        paths = _files(root, (_SEED_SUFFIX,))
    except BehaviorFileError as exc:
        errors.append(exc)
        return out
    for path in paths:
        try:
            seed = read_seed(path, behavior_ids)
        except BehaviorFileError as exc:
            errors.append(exc)
            continue
        if seed.id in out:
            errors.append(
                BehaviorFileError(
                    path, f"duplicate seed id {short_repr(seed.id)}, also defined in {out[seed.id].source}", "id"
                )
            )
            continue
        out[seed.id] = seed
    return out


@functools.cache
def _builtin_seeds() -> tuple[Seed, ...]:
    """The packaged seed banks, read once per process."""
    errors: list[BehaviorFileError] = []
    found = _seeds_from(SEEDS_DIR, frozenset(_builtin_behaviors()), errors)
    if errors:
        raise _combined(errors)
    return tuple(found.values())


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
    `behavior_ids` are the known behaviors (default: built-in ids): what a seed's `behavior` field may
    name and what a parent directory may carry to mark a bank. Every bad file is reported in one
    `BehaviorFileError`; each override of a seed id is reported as an `OverrideWarning`.
    """
    known = set(behavior_ids) if behavior_ids is not None else set(_builtin_behaviors())
    builtin: dict[str, Seed] = {s.id: s for s in _builtin_seeds()} if include_builtin else {}
    merged = _merge_user_files("seed", builtin, paths, lambda root, errors: _seeds_from(root, known, errors))
    if ids:
        missing = sorted(set(ids) - set(merged))
        if missing:
            named = ", ".join(f"{m}{suggestion(m, merged)}" for m in missing)
            raise ValueError(f"unknown seed id(s): {named}")
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
