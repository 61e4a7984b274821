from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from auditrl.auditworld.job.config import load_config
from auditrl.auditworld.job.results import AuditWorldResults
from auditrl.auditworld.job.run import run_from_config
from auditrl.scaffold.store import read_transcripts
from auditrl.train.config import ConfigFileError

CONFIG = Path(__file__).resolve().parents[3] / "configs" / "auditworld.yaml"
TINY_BASE = {"dagger_rounds": 1, "audits_per_round": 32, "fit_steps": 30, "turn_budgets": [8]}


def _tiny(path: Path, designs: set[str], seeds: list[int], transcripts: tuple[int, int], **train: int) -> Path:
    """The shipped config cut down to a few seconds: these designs and seeds, a tiny base, short audits."""
    raw = yaml.safe_load(CONFIG.read_text())
    raw["seeds"] = seeds
    raw["designs"] = [d for d in raw["designs"] if d["name"] in designs]
    raw["train"].update(group_size=4, **train)
    raw["train"]["init"].update(TINY_BASE)
    raw["evaluation"].update(rollouts=1, planted_turns=8, benign_turns=6)
    raw["analysis"].update(transcripts_per_policy=transcripts[0], transcripts_saved=transcripts[1])
    path.write_text(yaml.safe_dump(raw))
    return path


def test_default_config_trains_every_design_with_and_without_calibration_over_five_seeds() -> None:
    cfg = load_config(CONFIG)
    assert len(cfg.seeds) >= 5
    got = {(d.design, d.benign_fraction) for d in cfg.designs}
    every = {(d, f) for d in ("concerningness", "binary", "ingroup_pairwise", "reference_pairwise") for f in (0.0, 0.5)}
    dose = {("ingroup_pairwise", f) for f in (0.0, 0.125, 0.25, 0.5)}
    assert every | dose | {("concerningness", 1.0)} <= got
    assert cfg.train.init.kind == "imitation"  # every design starts from the competent base ...
    assert {d.init.kind for d in cfg.designs if d.init is not None} == {"random"}  # ... except the ablation rows


def test_bad_config_names_the_file_and_field(tmp_path: Path) -> None:
    raw = yaml.safe_load(CONFIG.read_text())
    raw["designs"][0]["design"] = "vibes"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigFileError, match=r"bad\.yaml: field 'designs\.0\.design'"):
        load_config(path)


@pytest.mark.parametrize(
    ("change", "pattern"),
    [
        (
            lambda raw: raw["train"].update(max_steps="abc"),
            r"field 'train\.max_steps': Input should be a valid integer",
        ),
        (
            lambda raw: raw["train"]["init"].update(expert="oracle"),
            r"field 'train\.init\.imitation\.expert': unknown scripted auditor 'oracle';"
            r" known: random, blind, experimenter",
        ),
        (
            lambda raw: raw["train"]["init"].update(competence=1.5),
            r"field 'train\.init\.imitation\.competence': Input should be less than or equal to 1",
        ),
        (lambda raw: raw.pop("evaluation"), r"field 'evaluation': Field required"),
        (lambda raw: raw["world"].update(sead=1), r"field 'world\.sead': unknown field \(known: .*seeds_per_behavior"),
        (
            lambda raw: raw["evaluation"].update(family="nonsense"),
            r"field 'evaluation\.family': unknown target family 'nonsense'; known families: .*wary",
        ),
        (
            lambda raw: raw.update(train_families=["steady", "chaty"]),
            r"field 'train_families': unknown target family 'chaty'",
        ),
        (
            lambda raw: raw["designs"][1].update(name="concerningness"),
            r"field 'designs': design names must be unique; repeated: concerningness",
        ),
        (lambda raw: raw.update(seeds=[1, 1]), r"field 'seeds': training seeds must be distinct"),
    ],
)
def test_config_problems_name_file_and_field_before_anything_runs(tmp_path: Path, change: object, pattern: str) -> None:
    raw = yaml.safe_load(CONFIG.read_text())
    change(raw)  # type: ignore[operator]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigFileError, match=r"bad\.yaml: " + pattern) as err:
        run_from_config(path, tmp_path / "run")
    assert "\n" not in str(err.value)
    assert not (tmp_path / "run").exists()


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("kind: auditworld\nseeds: [0, 1\ndesigns: []\n")
    with pytest.raises(ConfigFileError, match=r"bad\.yaml: line 3, column \d+: not valid YAML") as err:
        load_config(path)
    assert "unicode string" not in str(err.value)


def test_small_main_job_writes_results_transcripts_and_report(tmp_path: Path) -> None:
    kept = {"concerningness", "binary", "ingroup_pairwise", "reference_pairwise_cal50", "ingroup_cal50_random"}
    path = _tiny(tmp_path / "tiny.yaml", kept, [0], (3, 1), max_steps=3, groups_per_step=8)
    run = run_from_config(path, tmp_path / "run")
    results = AuditWorldResults.read(run)
    scripted = {"random", "blind", "experimenter", "interrogator", "experimenter, no claims"}
    assert set(results.results) == scripted | {"base", "base, random init"} | kept
    metrics = {"audit_quality", "false_positive", "realism", "composite"}
    for name, row in results.results.items():
        assert set(row.estimates) == metrics and set(row.across_training_seeds) == metrics | {"identified"}
        assert set(row.audit_quality_dimensions) == {
            "coherence",
            "depth",
            "evidence",
            "non_confrontation",
            "exhibited",
            "identified",
        }
        for spread in row.across_training_seeds.values():
            assert spread.seeds == [0] and len(spread.per_seed) == 1 and spread.lo is None  # one seed: no spread
        assert (row.trained_minus_base is not None) == (name in kept)
    assert results.results["ingroup_cal50_random"].base == "base, random init"
    assert results.results["binary"].base == "base"
    delta = results.results["binary"].trained_minus_base["identified"].mean  # type: ignore[index]
    binary, base = (results.results[n].across_training_seeds["identified"].mean for n in ("binary", "base"))
    assert delta == binary - base
    assert 0 < results.identification_ceiling <= 100
    agreement = results.bases["base"].facts["0"]["agreement"]
    assert set(agreement["measured"]) == {"tool", "topic", "framing", "pressure", "claim"}
    assert set(results.intervals) == {"estimates", "across_training_seeds", "trained_minus_base", "constant_metrics"}
    assert "reported no finding in any" in results.results["experimenter, no claims"].constant_metrics["false_positive"]
    assert all(len(r.history) == 3 for runs in results.training.values() for r in runs)
    raw = json.loads((run / "results.json").read_text())
    del raw["results"]["binary"]["estimates"]
    (run / "results.json").write_text(json.dumps(raw))
    with pytest.raises(ValidationError, match=r"results\.binary\.estimates"):
        AuditWorldResults.read(run)  # a results file of another shape fails naming the field
    assert len(read_transcripts(run / "transcripts.jsonl")) == 12 * 2
    html = (run / "report.html").read_text()
    assert re.findall(r"<h2>([^<]*)</h2>", html)[0] == "Headline"  # the report opens with the headline tables
    assert "identification ceiling" in html and "Trained minus base" in html and "scores composite" in html
    assert "Assumptions, set by hand" in html and "The paper&#39;s rows" in html and "dose-response" in html
    assert "Base competence: imitation of experimenter" in html and "<script" not in html
    assert "Two kinds of 95% interval" in html and "Zero-width intervals" in html
    assert "by construction" in html  # the in-group pairwise caption, generated because that design ran
    listed = re.findall(
        r'<span class="outcome [^"]*">([^<]*)</span> &middot; <span class="archetype">archetype: ', html
    )
    assert listed and set(listed) <= {"identified", "missed", "false positive", "correctly clean", "no readable report"}
    assert "held-out audits of each auditor per seed" in html  # the transcripts say how they were picked


@pytest.mark.usefixtures("no_report_images")
def test_a_rerun_reuses_the_cached_bases_and_runs(tmp_path: Path) -> None:
    path = _tiny(tmp_path / "one.yaml", {"binary"}, [0], (2, 0), max_steps=2, groups_per_step=4)
    first = json.loads((run_from_config(path, tmp_path / "run") / "results.json").read_text())
    files = sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir())
    assert len(files) == 2 and files[0].startswith("base-imitation-")
    second = json.loads((run_from_config(path, tmp_path / "run") / "results.json").read_text())
    assert second["results"] == first["results"]
    raw = yaml.safe_load(path.read_text())
    raw["train"]["init"]["competence"] = 0.9  # another base: built again, next to the first
    path.write_text(yaml.safe_dump(raw))
    run_from_config(path, tmp_path / "run")
    assert len([p for p in (tmp_path / "run" / "checkpoints").iterdir() if p.name.startswith("base-")]) == 2


def test_two_seed_run_reports_a_between_seed_interval(tmp_path: Path) -> None:
    path = _tiny(tmp_path / "two.yaml", {"reference_pairwise_cal50"}, [0, 1], (2, 0), max_steps=4, groups_per_step=8,
                 reference_refresh_steps=2)  # fmt: skip
    run = run_from_config(path, tmp_path / "run")
    results = json.loads((run / "results.json").read_text())
    row = results["results"]["reference_pairwise_cal50"]
    spread = row["across_training_seeds"]["audit_quality"]
    assert (
        spread["seeds"] == [0, 1]
        and spread["n"] == 2
        and 0.0 <= spread["lo"] <= spread["mean"] <= spread["hi"] <= 100.0
    )
    delta = row["trained_minus_base"]["composite"]
    assert delta["n"] == 2 and delta["lo"] <= delta["mean"] <= delta["hi"]
    html = (run / "report.html").read_text()
    assert "refreshed every 2 steps" in html and "step 2" in html  # caption from the config, not a fixed text


@pytest.mark.usefixtures("no_report_images")
def test_an_unreadable_stored_base_or_run_is_built_again_with_a_warning(tmp_path: Path) -> None:
    path = _tiny(tmp_path / "one.yaml", {"binary"}, [0], (2, 0), max_steps=2, groups_per_step=4)
    first = json.loads((run_from_config(path, tmp_path / "run") / "results.json").read_text())
    stored = sorted((tmp_path / "run" / "checkpoints").iterdir())  # the base, then the training run
    for damage in ((b"", b"[" * 5000), (b"\xff\xfe", b'{"config": 1}')):
        for file, bad in zip(stored, damage, strict=True):
            file.write_bytes(bad)
        with pytest.warns(UserWarning) as caught:
            again = json.loads((run_from_config(path, tmp_path / "run") / "results.json").read_text())
        named = " ".join(str(w.message) for w in caught)
        assert all(file.name in named for file in stored), named
        assert again["results"] == first["results"]
        assert all(file.is_file() and file.read_bytes() not in damage for file in stored)


LM_STACK = ("inspect_ai", "transformers", "trl", "peft")
JOB_PROBE = """
import json, sys
from pathlib import Path
from auditrl.auditworld.job.config import load_config
from auditrl.auditworld.job.run import run_from_config
load_config(Path(sys.argv[1]))
print(json.dumps(sorted(m for m in LM_STACK if m in sys.modules)))
"""


def test_the_main_job_loads_and_checks_its_config_without_the_language_model_stack() -> None:
    """`make run` pays for no import it does not use: inspect-ai alone cost 1.5 CPU-s of every run."""
    code = f"LM_STACK = {LM_STACK!r}\n{JOB_PROBE}"
    done = subprocess.run([sys.executable, "-c", code, str(CONFIG)], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
