"""The private TRL methods auditrl overrides keep the signatures the overrides were written against, and
docs/training_step.md names each of them and walks one step through at most twelve files that exist."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import trl.trainer.utils as trl_utils
from trl import GRPOTrainer

from auditrl.train.trainer import AuditGRPOTrainer

ROOT = Path(__file__).resolve().parents[2]
OVERRIDDEN = {
    "GRPOTrainer._generate": "(self, prompts: list)",
    "GRPOTrainer._generate_and_score_completions": (
        "(self, inputs: list[dict[str, torch.Tensor | typing.Any]]) -> dict[str, torch.Tensor | typing.Any]"
    ),
    "GRPOTrainer._compute_loss": "(self, model, inputs)",
    "GRPOTrainer._get_per_token_logps_and_entropies": (
        "(self, model, input_ids, attention_mask, logits_to_keep, batch_size=None, compute_entropy=False, "
        "compute_aux_loss=False, pixel_values=None, image_grid_thw=None, num_images=None, pixel_attention_mask=None, "
        "spatial_shapes=None, num_tiles=None, image_sizes=None, token_type_ids=None, mm_token_type_ids=None, "
        "image_position_ids=None) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]"
    ),
    "trl.trainer.utils._use_triton": "(device: 'torch.device') -> 'bool'",
}
"""Each private TRL function auditrl overrides or patches, with the signature of the pinned TRL."""


def _trl(name: str) -> object:
    owner, _, attr = name.rpartition(".")
    return getattr(GRPOTrainer if owner == "GRPOTrainer" else trl_utils, attr)


def test_the_pinned_trl_keeps_the_signatures_of_the_private_methods_auditrl_overrides() -> None:
    changed = {name: str(inspect.signature(_trl(name))) for name in OVERRIDDEN}
    assert changed == OVERRIDDEN, "TRL changed a private method auditrl overrides: review train/trainer.py"


def test_every_private_override_is_listed_and_every_listed_one_is_overridden() -> None:
    own = {f"GRPOTrainer.{n}" for n, v in vars(AuditGRPOTrainer).items() if n.startswith("_") and not n.startswith("__")
           and callable(v) and hasattr(GRPOTrainer, n)}  # fmt: skip
    assert own == {n for n in OVERRIDDEN if n.startswith("GRPOTrainer.")}
    assert "trl_utils._use_triton" in (ROOT / "src/auditrl/train/trainer.py").read_text(encoding="utf-8")


def test_the_training_step_page_names_each_override_and_at_most_twelve_files_that_exist() -> None:
    page = (ROOT / "docs" / "training_step.md").read_text(encoding="utf-8")
    walk, _, table = page.partition("## The private TRL methods auditrl overrides")
    files = re.findall(r"^\d+\. \*\*`([^`]+)`\*\*", walk, flags=re.MULTILINE)
    assert 0 < len(files) <= 12 and len(set(files)) == len(files)
    assert all((ROOT / "src" / "auditrl" / f).is_file() for f in files), files
    assert set(re.findall(r"`([\w/]+\.py)`", walk)) == set(files)  # the walk names no other source file
    assert set(re.findall(r"^\| `([\w.]+)` \|", table, flags=re.MULTILINE)) == set(OVERRIDDEN)
