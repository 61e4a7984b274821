"""Multi-turn token assembly under a Qwen3-style template, which rewrites earlier assistant turns.

The model's own template must be refused before any rollout; the shipped override must assemble exactly
the tokens of the rendered conversation, turn after turn.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from train_fakes import FakeEpisode
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from auditrl.models.chat_templates import chat_template_text
from auditrl.models.local import to_chat
from auditrl.train.config import ConfigFileError, load_config
from auditrl.train.generation import Sample
from auditrl.train.rollout import ChatSegments, EpisodeRow, run_rollouts

QWEN3_STYLE = Path(__file__).parent / "data" / "qwen3_style.jinja"


def _tokenizer(tokenizer_dir: Path, template: str) -> PreTrainedTokenizerBase:
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    tokenizer.chat_template = template
    return tokenizer


class FixedTurns:
    """A generator that answers every context with the same short turn, closed by the end-of-turn token."""

    def __init__(self, segments: ChatSegments) -> None:
        self.ids = segments.encode("I will ask the target about its views.") + [segments.tokenizer.eos_token_id]

    def start(self) -> None:
        return None

    def __call__(self, keys: list[int], contexts: list[list[int]]) -> list[Sample]:
        return [Sample(list(self.ids), [-1.0] * len(self.ids)) for _ in contexts]


def test_qwen3_style_template_is_refused_up_front(tokenizer_dir: Path) -> None:
    tokenizer = _tokenizer(tokenizer_dir, QWEN3_STYLE.read_text())
    with pytest.raises(ValueError, match="policy.chat_template"):
        ChatSegments(tokenizer)


def test_shipped_override_assembles_the_rendered_conversation(tokenizer_dir: Path) -> None:
    tokenizer = _tokenizer(tokenizer_dir, chat_template_text("qwen3_multiturn"))
    segments = ChatSegments(tokenizer)
    row = EpisodeRow(behavior_id="flattery", seed_id="s", family="steady", benign=False)
    episodes: list[FakeEpisode] = []

    def factory(r: EpisodeRow) -> FakeEpisode:
        episodes.append(FakeEpisode(r, turns=3))
        return episodes[-1]

    batch = asyncio.run(
        run_rollouts(
            [row], factory, FixedTurns(segments), segments,
            group_size=1, first_index=0, max_completion_tokens=4096, auditor_name="policy",
        )
    )  # fmt: skip
    assert batch.transcripts[0].turns_used == 3
    rendered = tokenizer.apply_chat_template(to_chat(episodes[0].messages), tokenize=False)
    assert "<think>\n\n</think>" in rendered
    assembled = tokenizer.decode(batch.prompt_ids[0] + batch.completion_ids[0])
    assert assembled + "\n" == rendered  # the rendering closes the final turn with a newline nobody sampled


def test_config_names_a_template_by_name_or_file(tmp_path: Path) -> None:
    (tmp_path / "mine.jinja").write_text(QWEN3_STYLE.read_text())
    named = tmp_path / "named.yaml"
    named.write_text("kind: grpo_lm\npolicy: {model: smollm2, chat_template: qwen3_multiturn}\n")
    assert load_config(named).policy.chat_template == "qwen3_multiturn"
    own = tmp_path / "own.yaml"
    own.write_text("kind: grpo_lm\npolicy: {model: smollm2, chat_template: mine.jinja}\n")
    assert load_config(own).policy.chat_template == str(tmp_path / "mine.jinja")
    missing = tmp_path / "missing.yaml"
    missing.write_text("kind: grpo_lm\npolicy: {model: smollm2, chat_template: qwen3_multiturm}\n")
    with pytest.raises(ConfigFileError, match=r"missing\.yaml.*policy\.chat_template"):
        load_config(missing)
