"""The KV-cache estimate of `--dry-run` bounds what TurnCache really holds while a turn is generated.

Measured in a child process (peak resident memory, Linux): glibc is told to map every large allocation on
its own, so a freed tensor leaves resident memory at once and the peak counts only tensors alive together.
The model has a 64-word vocabulary, so the key/value cache is nearly all that a turn allocates. Contexts of
about 750 tokens hold a 98 MB cache: the measured copies (1.18) were those of contexts twice as long, at half the
child's compute.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from auditrl.train.memory import ModelShape, kv_cache_copies

SHAPE = ModelShape(
    params=0, layers=8, hidden=512, heads=8, kv_heads=8, head_dim=64, intermediate=64, vocab=64, context=4096
)
CHILD = """
import gc, json, re, sys, torch
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM
from auditrl.train.generation import TurnCache

def status(field):
    return int(re.search(field + r":\\s+(\\d+)", open("/proc/self/status").read()).group(1)) * 1024

torch.manual_seed(0)
config = LlamaConfig(vocab_size=64, hidden_size=512, intermediate_size=64, num_hidden_layers=8, num_attention_heads=8,
                     num_key_value_heads=8, max_position_embeddings=2048, eos_token_id=63, pad_token_id=0,
                     bos_token_id=1)
model = LlamaForCausalLM(config).eval()
rows, new = 4, 8
generation = GenerationConfig(do_sample=False, max_new_tokens=new, pad_token_id=0, eos_token_id=[63],
                              output_logits=True, return_dict_in_generate=True)
contexts = [[2 + (i * 7 + j) % 60 for j in range(750 - 25 * i)] for i in range(rows)]
cache = TurnCache()
with torch.no_grad():
    samples = cache.generate(model, list(range(rows)), contexts, generation, 0, {63})
    contexts = [c + s.ids + [5] * (10 + 5 * i) for i, (c, s) in enumerate(zip(contexts, samples))]
    gc.collect()
    held = sum(t.numel() * t.element_size() for r in cache.rows.values() for layer in r.layers for t in layer)
    open("/proc/self/clear_refs", "w").write("5")
    base = status("VmRSS") - held
    samples = cache.generate(model, list(range(rows)), contexts, generation, 0, {63})
    peak = status("VmHWM")
tokens = sum(len(c) + new for c in contexts)
print(json.dumps({"peak": peak - base, "tokens": tokens}))
"""


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="peak resident memory is read from Linux /proc")
def test_turn_cache_peak_is_within_the_estimate() -> None:
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    one_copy = measured["tokens"] * SHAPE.kv_bytes_per_token("float32")
    copies = measured["peak"] / one_copy
    assert 0.9 <= copies <= kv_cache_copies(SHAPE) * 1.15, f"{copies:.2f} copies of the live cache at the peak"
