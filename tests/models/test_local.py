"""The local provider on the packaged SmolLM2: chat template, prefill continuation, usage, one load."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser, GenerateConfig, get_model
from inspect_ai.tool import ToolInfo, ToolParams

import auditrl.models.local as local
from auditrl.models.precision import resolve_dtype

EXACT = "float32"
"""Tests of exact outputs pin float32: under `auto` a CPU with native bf16 loads bfloat16, whose rounding flips
near-tied tokens (SmolLM2's greedy answer to QUESTION begins "La femme" there) and makes a reply sampled after a
reused prefix cache differ from a cold start's, so outputs would depend on the machine."""

QUESTION = [
    ChatMessageSystem(content="You are a concise assistant."),
    ChatMessageUser(content="What is the capital of France?"),
]


def test_alias_and_gguf_paths_resolve_without_loading() -> None:
    source = local.resolve_source("smollm2")
    assert source.gguf_file == local.SMOLLM2_GGUF
    assert local.resolve_source(f"{source.location}/{source.gguf_file}") == source
    with pytest.raises(FileNotFoundError, match="nothing.gguf"):
        local.resolve_source("nothing.gguf")
    with pytest.raises(ValueError, match="dtype must be one of"):
        get_model("local/smollm2", dtype="float8", memoize=False)
    with pytest.raises(ValueError, match="unknown model args"):
        get_model("local/smollm2", temperature=0.3, memoize=False)


@pytest.mark.slow
async def test_greedy_generation_reports_usage_and_is_repeatable() -> None:
    model = get_model("local/smollm2", dtype=EXACT, memoize=False)
    config = GenerateConfig(max_tokens=12)
    first = await model.generate(QUESTION, config=config)
    second = await model.generate(QUESTION, config=config)
    assert "Paris" in first.completion
    assert first.completion == second.completion
    assert first.usage is not None and first.usage.input_tokens > 10
    assert 0 < first.usage.output_tokens <= 12
    assert first.usage.total_tokens == first.usage.input_tokens + first.usage.output_tokens


@pytest.mark.slow
async def test_prefill_is_continued_and_not_repeated() -> None:
    model = get_model("local/smollm2", memoize=False)
    prefilled = QUESTION + [ChatMessageAssistant(content="The capital of France is")]
    output = await model.generate(prefilled, config=GenerateConfig(max_tokens=8))
    assert "Paris" in output.completion
    assert not output.completion.startswith("The capital")


@pytest.mark.slow
async def test_max_tokens_and_seeded_sampling() -> None:
    model = get_model("local/smollm2", dtype=EXACT, memoize=False)
    prompt = [ChatMessageUser(content="Write a long story about a dragon.")]
    config = GenerateConfig(max_tokens=6, temperature=1.0, seed=7)
    first = await model.generate(prompt, config=config)
    second = await model.generate(prompt, config=config)
    assert first.stop_reason == "max_tokens" and first.usage is not None and first.usage.output_tokens == 6
    assert first.completion == second.completion


@pytest.mark.slow
async def test_weights_load_once_per_process_and_tools_are_emulated() -> None:
    a = get_model("local/smollm2", memoize=False)
    b = get_model("local/smollm2", memoize=False)
    await a.generate("Hi", config=GenerateConfig(max_tokens=2))
    assert local.load_local("smollm2") is local.load_local("smollm2")
    auto = resolve_dtype("auto")  # loads of other dtypes (the float32 tests above) are other weights
    assert len([k for k in local._loaded if k[0] == local.resolve_source("smollm2") and k[3] == auto]) == 1
    tool = ToolInfo(name="search", description="Search the web.", parameters=ToolParams())
    output = await b.generate("Search the web for cats.", tools=[tool], config=GenerateConfig(max_tokens=30))
    assert output.usage is not None and output.usage.input_tokens > 60
    assert all(call.function == "search" or call.parse_error for call in output.message.tool_calls or [])


@pytest.mark.slow
async def test_prefix_cache_reuse_gives_the_cold_start_reply() -> None:
    model = get_model("local/smollm2", memoize=False)
    loaded = local.load_local("smollm2")
    system = ChatMessageSystem(content="You are PRISM-4, a helpful assistant made by Nexus Research. " * 8)
    first = [system, ChatMessageUser(content="Name a fruit.")]
    second = first + [ChatMessageAssistant(content="Apple."), ChatMessageUser(content="Name another one.")]
    config = GenerateConfig(max_tokens=10)
    loaded.prefixes.entries.clear()
    cold = await model.generate(second, config=config)
    loaded.prefixes.entries.clear()
    await model.generate(first, config=config)
    ids = loaded.tokenizer.apply_chat_template(local.to_chat(second), add_generation_prompt=True)["input_ids"]
    reused = loaded.prefixes.lookup(ids)
    assert reused is not None and local.PrefixCache.MIN_REUSE <= reused.get_seq_length() < len(ids)
    warm = await model.generate(second, config=config)
    assert warm.completion == cold.completion


@pytest.mark.slow
def test_gguf_tokenizer_gets_the_files_end_and_pad_tokens() -> None:
    loaded = local.load_local("smollm2")
    tokenizer = loaded.tokenizer
    assert tokenizer.eos_token == tokenizer.pad_token == "<|im_end|>"
    # what transformers 5.17 reads from the same file: the bos token as eos, no pad token
    tokenizer.eos_token, tokenizer.pad_token = tokenizer.bos_token, None
    try:
        local.align_gguf_special_tokens(tokenizer, loaded.model)
        assert tokenizer.eos_token_id == loaded.model.config.eos_token_id
        assert tokenizer.eos_token == tokenizer.pad_token == "<|im_end|>"
    finally:
        tokenizer.eos_token = tokenizer.pad_token = "<|im_end|>"


@pytest.mark.slow
def test_the_dense_conversion_matches_the_gguf_and_is_made_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = local.smollm2_source()
    dense = local.dense_source(gguf)
    assert dense.gguf_file is None and Path(dense.location).parent == local.cache_root()
    with monkeypatch.context() as patch:
        patch.setattr(
            transformers.AutoModelForCausalLM, "from_pretrained", lambda *a, **k: pytest.fail("converted twice")
        )
        assert local.dense_source(gguf) == dense
    chat = local.to_chat([*QUESTION, ChatMessageAssistant(content="Paris, ünïcode <|im_end|>")])
    with local.gguf_parsed_once():  # the file parsed once for both reference loads, as the conversion parses it
        direct = AutoTokenizer.from_pretrained(gguf.location, gguf_file=gguf.gguf_file)
        want = AutoModelForCausalLM.from_pretrained(
            gguf.location, gguf_file=gguf.gguf_file, dtype=torch.float32
        ).state_dict()
    converted = AutoTokenizer.from_pretrained(dense.location)
    assert converted.apply_chat_template(chat)["input_ids"] == direct.apply_chat_template(chat)["input_ids"]
    assert (
        converted.chat_template == direct.chat_template and converted.eos_token == converted.pad_token == "<|im_end|>"
    )
    have = AutoModelForCausalLM.from_pretrained(dense.location, dtype=torch.float32).state_dict()
    assert want.keys() == have.keys() and all(torch.equal(want[k], have[k]) for k in want)
    assert local.dense_source(local.WeightsSource("some/hub-id")) == local.WeightsSource("some/hub-id")


def test_a_copy_of_the_file_elsewhere_reuses_its_conversion(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each virtual environment unpacks its own copy of the model file: one conversion serves them all."""
    import transformers

    gguf = local.smollm2_source()
    dense = local.dense_source(gguf)
    copy = tmp_path / "venv-b"
    copy.mkdir()
    shutil.copyfile(Path(gguf.location) / str(gguf.gguf_file), copy / str(gguf.gguf_file))
    for loader in (transformers.AutoModelForCausalLM, transformers.AutoTokenizer):
        monkeypatch.setattr(loader, "from_pretrained", lambda *a, **k: pytest.fail("converted again"))
    assert local.dense_source(local.WeightsSource(str(copy), gguf.gguf_file)) == dense
    with (copy / str(gguf.gguf_file)).open("r+b") as changed:  # other content: its own conversion
        changed.seek(-1, 2)
        changed.write(b"\x01" if changed.read(1) != b"\x01" else b"\x02")
    with pytest.raises(pytest.fail.Exception, match="converted again"):
        local.dense_source(local.WeightsSource(str(copy), gguf.gguf_file))


def test_a_gguf_file_is_parsed_once_within_the_context_and_gguf_is_restored_after(tmp_path: Path) -> None:
    import gguf
    import numpy as np

    path = tmp_path / "tiny.gguf"
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_block_count(2)
    writer.add_tensor("token_embd.weight", np.ones((4, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    with local.gguf_parsed_once():
        first = gguf.GGUFReader(path)
        assert gguf.GGUFReader(str(path)) is first and gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 2) is (
            gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 2)
        )
        assert gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 2).mapping == name_map(gguf.MODEL_ARCH.LLAMA, 2).mapping
    assert (gguf.GGUFReader, gguf.get_tensor_name_map) == (reader, name_map)
    again = gguf.GGUFReader(path)
    assert again is not first and list(again.fields) == list(first.fields)
    assert np.array_equal(again.tensors[0].data, first.tensors[0].data)


def test_the_cache_folder_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(local.CACHE_DIR_ENV, str(tmp_path / "mine"))
    assert local.cache_root() == tmp_path / "mine"
    monkeypatch.delenv(local.CACHE_DIR_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert local.cache_root() == tmp_path / "xdg" / "auditrl"
