"""Check that `pip install -e '.[gpu]'` resolves on a CUDA machine, without a GPU and without installing anything.

pip resolves the project's wheel with its `gpu` extra and the Makefile's torch pin for manylinux x86-64 and each
Python version asked for (`pip install --dry-run --report`), against the package index alone (no local pip
configuration), from binary wheels only, as a CUDA machine would install them: PyPI's Linux torch wheels are
the CUDA builds, so the resolution includes their nvidia-* runtime wheels. DeepSpeed ships only a source
archive; it is built here into a wheel (it builds without torch or CUDA, compiling its ops at run time) so
that its requirements take part. The reports are written to `--out`; the script prints the versions that
matter and exits non-zero if the resolution fails or differs from the pins.

    python scripts/check_gpu_extra.py --python 3.11 3.12      # a few minutes per version: metadata only
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLATFORMS = [f"manylinux_2_{n}_x86_64" for n in range(17, 40)] + ["manylinux2014_x86_64", "manylinux1_x86_64"]
"""pip matches platform tags exactly, so every glibc level a current CUDA machine accepts is named."""
SHOWN = ("torch", "transformers", "trl", "vllm", "deepspeed", "accelerate", "peft", "flashinfer-python", "xformers")


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def gpu_pins() -> dict[str, str]:
    """`name: version` of the `==` pins of the gpu extra, plus torch from the Makefile's install step."""
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["gpu"]
    pins = {}
    for requirement in extra:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([0-9.]+)", requirement.replace(" ", ""))
        if match:
            pins[normalise(match.group(1))] = match.group(2)
    torch = re.search(r"pip install -q torch==([0-9.]+)", (ROOT / "Makefile").read_text())
    if torch is None:
        raise SystemExit("the Makefile's torch pin (pip install -q torch==X) was not found")
    pins["torch"] = torch.group(1)
    return pins


def pip(*args: str) -> None:
    """pip against the index alone: no configuration file or environment settings of this machine."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")} | {"PIP_CONFIG_FILE": os.devnull}
    subprocess.run([sys.executable, "-m", "pip", *args], check=True, env=env)


def build_wheels(folder: Path, pins: dict[str, str]) -> Path:
    """The project's wheel, and DeepSpeed's built from its source archive; returns the project's."""
    pip("wheel", "--quiet", "--no-deps", "--wheel-dir", str(folder), str(ROOT))
    pip(
        "wheel",
        "--quiet",
        "--no-deps",
        "--no-binary",
        "deepspeed",
        "--wheel-dir",
        str(folder),
        f"deepspeed=={pins['deepspeed']}",
    )
    return next(folder.glob("auditrl-*.whl"))


def resolve(python: str, wheel: Path, folder: Path, pins: dict[str, str], out: Path) -> dict[str, str]:
    report = out / f"gpu-extra-py{python}.json"
    platforms = [arg for tag in PLATFORMS for arg in ("--platform", tag)]
    pip(
        "install", "--quiet", "--dry-run", "--ignore-installed", "--only-binary=:all:", *platforms,
        "--python-version", python, "--implementation", "cp", "--find-links", str(folder), "--report", str(report),
        f"auditrl[gpu] @ {wheel.as_uri()}", f"torch=={pins['torch']}",
    )  # fmt: skip
    installs = json.loads(report.read_text())["install"]
    return {normalise(i["metadata"]["name"]): i["metadata"]["version"] for i in installs}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", nargs="+", default=["3.12"], help="Python versions to resolve for")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "gpu-resolution", help="where the reports go")
    args = parser.parse_args()
    pins = gpu_pins()
    args.out.mkdir(parents=True, exist_ok=True)
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        wheel = build_wheels(folder, pins)
        for python in args.python:
            resolved = resolve(python, wheel, folder, pins, args.out)
            cuda = sorted(n for n in resolved if n.startswith("nvidia-"))
            print(f"Python {python}: {len(resolved)} packages resolve; {len(cuda)} nvidia-* CUDA runtime wheels")
            for name in SHOWN:
                if name in resolved:
                    wanted = pins.get(name)
                    ok = wanted is None or resolved[name] == wanted
                    failures += not ok
                    print(
                        f"  {name:18} {resolved[name]:12} {'pinned' if wanted else ''}{'' if ok else f' != {wanted}'}"
                    )
            if not cuda:
                failures += 1
                print("  torch resolved without its CUDA runtime wheels: not the CUDA build")
    print(f"reports in {args.out}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
