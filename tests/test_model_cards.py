"""Model cards (`l3p card`, apps/cards.py): every shipped model's README.md is exactly what its files
give, a card that drifts from them fails, and the README's headline table is the eval files'."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from l3p import cli
from l3p.cards import CARD, EVAL, NOTES, CardError, render
from l3p.core.bundle_format import bundle_digest

ROOT = Path(__file__).resolve().parents[1]
MODELS = sorted(p.parent for p in (ROOT / "models").glob("*/manifest.json"))


def l3p_card(*args: str) -> subprocess.CompletedProcess:
    code = f"import sys\nfrom l3p.cli import main\nsys.exit(main(['card', *{list(args)!r}]))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)


@pytest.fixture
def model_copy(tmp_path) -> Path:
    """A copy of a shipped model (bundle, evaluations, notes, card) to change."""
    copy = tmp_path / "AntMaze_Medium-v5"
    shutil.copytree(ROOT / "models" / "AntMaze_Medium-v5", copy)
    return copy


def test_every_shipped_model_has_a_card():
    assert len(MODELS) >= 7
    for model in MODELS:
        assert (model / CARD).is_file(), f"{model.name}: no card; run: l3p card models/{model.name}"
        assert (model / EVAL).is_file(), f"{model.name}: no {EVAL}"


@pytest.mark.parametrize("model", MODELS, ids=[m.name for m in MODELS])
def test_each_card_is_exactly_what_its_files_give(model):
    assert (model / CARD).read_text() == render(model), \
        f"models/{model.name}/{CARD} drifted from its files; run: l3p card models/{model.name}"


# What a card writes where its files lack a value ("far pairs ≥ ? cells"): a lone question mark.
PLACEHOLDER = re.compile(r"(?<![\w`*?])\?(?=[\s).,;:]|$)", re.MULTILINE)


@pytest.mark.parametrize("model", MODELS, ids=[m.name for m in MODELS])
def test_no_card_prints_a_placeholder(model):
    for number, line in enumerate((model / CARD).read_text().splitlines(), 1):
        assert not PLACEHOLDER.search(line), f"models/{model.name}/{CARD}:{number}: a placeholder: {line}"


def test_the_check_command_passes_on_the_shipped_cards():
    proc = l3p_card("--all", "models", "--check")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count(": up to date") == len(MODELS)


def test_a_changed_evaluation_fails_the_check_in_one_line_and_card_rewrites_it(model_copy):
    report = json.loads((model_copy / EVAL).read_text())
    assert report["modes"]["l3p"]["successes"] == 68
    report["modes"]["l3p"]["successes"] = 67
    (model_copy / EVAL).write_text(json.dumps(report))

    proc = l3p_card(str(model_copy), "--check")
    assert proc.returncode == 1
    assert proc.stderr == (f"l3p card: error: card out of date with its files: {model_copy}; "
                           f"run: l3p card {model_copy}\n")
    assert "**68 / 100**" in (model_copy / CARD).read_text()  # --check writes nothing

    proc = l3p_card(str(model_copy))
    assert proc.returncode == 0 and proc.stdout == f"{model_copy / CARD}: written\n", proc.stderr
    card = (model_copy / CARD).read_text()
    assert "| **67 / 100** |" in card and "`l3p` 67 / 100, `policy` 0 / 100" in card
    assert l3p_card(str(model_copy), "--check").returncode == 0


def test_changed_notes_or_a_new_picture_fail_the_check(model_copy):
    (model_copy / NOTES).write_text((model_copy / NOTES).read_text() + "\nOne more measured line.\n")
    assert l3p_card(str(model_copy), "--check").returncode == 1
    l3p_card(str(model_copy))
    shutil.copy(model_copy / "landmarks.png", model_copy / "landmarks_500k.png")
    assert l3p_card(str(model_copy), "--check").returncode == 1
    l3p_card(str(model_copy))
    assert "![landmarks 500k](landmarks_500k.png)" in (model_copy / CARD).read_text()


def test_the_card_cites_the_protocol_and_the_run_from_the_files():
    card = (ROOT / "models" / "AntMaze_Medium-v5" / CARD).read_text()
    assert "100 per variant" in card and "seeds 2 000 000 000 + i, i < 100" in card
    assert "≥ 8 cells apart" in card and "1000-step episodes" in card
    assert "--episodes 100 --seed 2000000000 --pairs far --min-cells 8 --max-steps 1000" in card
    assert "l3p train --resume runs/AntMaze_Medium-v5-r08" in card
    assert "1 200 000 env steps" in card and "590 000 optimizer steps" in card
    assert "| `l3p` (served default: soft search, d_max 30, local horizon 10, `prune_failed`) | **68 / 100** " \
           "| 58 – 76 % | 3.35 | 217 | 12 | 0.73 / 2.43 ms | 68 / 0 |" in card
    umaze = (ROOT / "models" / "AntMaze_UMaze-v5" / CARD).read_text()
    assert "### `eval_heldout_700_steps.json`: max_steps 700" in umaze  # further evaluations get a table
    # A bundle made from a bundle (`l3p export BUNDLE OUT --planner ...`) says so, from its provenance.
    giant = ROOT / "models" / "antmaze-giant-stitch"
    change, dropped = json.loads((giant / "manifest.json").read_text())["provenance"]["rebundled"]
    card = (giant / CARD).read_text()
    assert f"(the networks and graphs of bundle `{change['from_sha256'][:12]}`)" in card
    assert "l3p export runs/ant-giant-stitch-e1-s0/bundle runs/s63/nh-g0 --planner next_hop=true" in card
    assert "| `l3p` (served default: soft search, d_max 14.36, local horizon 20, `next_hop`) | **242 / 250** " in card
    # The settings next_hop made do nothing, dropped: the evaluation of the bundle before holds (same actions).
    assert dropped["same_actions"] is True and f"(the networks and graphs of bundle `{dropped['from_sha256'][:12]}`)" in card
    assert "- **Same actions**: the settings it changed did nothing beside the others" in card
    assert f"- **Bundle**: measured on bundle `{dropped['from_sha256'][:12]}`" in card


def test_an_evaluation_of_a_bundle_acting_alike_holds_only_through_same_actions(tmp_path):
    giant = tmp_path / "antmaze-giant-stitch"
    shutil.copytree(ROOT / "models" / "antmaze-giant-stitch", giant)
    assert render(giant) == (giant / CARD).read_text()
    manifest = json.loads((giant / "manifest.json").read_text())
    manifest["provenance"]["rebundled"][-1]["same_actions"] = False
    (giant / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CardError, match=r"measured on bundle 3f838aa9444f…, but this bundle is"):
        render(giant)


def test_a_dirty_export_says_what_dirty_means_and_names_the_files_when_recorded():
    """``-dirty`` (git describe at export) is explained on the card: the files when the manifest lists
    them (exports since they are recorded), an honest "not recorded" for older manifests."""
    from l3p.cards import training

    shipped = (ROOT / "models" / "PointMaze_Large-v3" / CARD).read_text()
    assert "706de44-dirty; exported 2026-11-22T17:13:41+00:00. `-dirty`: exported from a working tree with " \
           "uncommitted changes (which files, this manifest does not record)" in shipped
    assert "`-dirty`" not in (ROOT / "models" / "AntMaze_Medium-v5" / CARD).read_text()
    manifest = json.loads((ROOT / "models" / "AntMaze_Medium-v5" / "manifest.json").read_text())
    manifest["provenance"].update({"code_version": "0.1.0 (git 06557aa-dirty)",
                                   "uncommitted": [f"training/m{i}.py" for i in range(12)]})
    card = "\n".join(training(manifest))
    assert ("0.1.0 (git 06557aa-dirty); exported 2026-11-26T00:13:49+00:00. `-dirty`: exported from a working tree "
            "with uncommitted changes to `training/m0.py`, ") in card
    assert "`training/m9.py` and 2 more files; the commit named is the nearest one, not the exact code." in card


def test_an_evaluation_of_another_bundle_is_refused(model_copy):
    report = json.loads((model_copy / EVAL).read_text())
    report["model"]["bundle_sha256"] = "0" * 64
    (model_copy / EVAL).write_text(json.dumps(report))
    with pytest.raises(CardError, match=r"measured on bundle 000000000000…, but this bundle is 23c42f69b1af…"):
        render(model_copy)


@pytest.mark.parametrize("remove, message", [
    (EVAL, r"eval_heldout\.json: missing"),
    ("manifest.json", r"no manifest\.json"),
])
def test_missing_files_are_one_line_errors(model_copy, remove, message):
    (model_copy / remove).unlink()
    proc = l3p_card(str(model_copy))
    assert proc.returncode == 2 and re.fullmatch(rf"l3p card: error: .*{message}.*\n", proc.stderr), proc.stderr


def ogbench_like(report: dict, shape: str) -> dict:
    """The shipped report recast with five per-task rows (the shape an OGBench evaluation adds)."""
    out = {k: v for k, v in report.items() if k != "modes"}
    per_task = {str(k): {variant: {"episodes": 20, "successes": 20 - k - (variant == "policy") * 10}
                         for variant in ("l3p", "policy")} for k in range(1, 6)}
    if shape == "tasks":
        out["tasks"] = {task: {"modes": variants} for task, variants in per_task.items()}
    else:
        out["modes"] = {variant: {**report["modes"][variant],
                                  "tasks": [{"task": task, **per_task[task][variant]} for task in per_task]}
                        for variant in ("l3p", "policy")}
    return out


@pytest.mark.parametrize("shape", ["tasks", "modes"])
def test_per_task_rows_get_a_table_of_their_own(model_copy, shape):
    report = json.loads((model_copy / EVAL).read_text())
    (model_copy / EVAL).write_text(json.dumps(ogbench_like(report, shape)))
    card = render(model_copy)
    assert "| task | `l3p` | `policy` |" in card and "the benchmark's 5 evaluation tasks" in card
    assert "| task 1 | 19 / 20 | 9 / 20 |" in card and "| task 5 | 15 / 20 | 5 / 20 |" in card
    if shape == "tasks":  # no overall rows in the file: each variant's tasks summed
        assert "| **85 / 100** |" in card and "| 35 / 100 |" in card
        assert "--modes l3p,policy" in card
    else:
        assert "| **68 / 100** |" in card


@pytest.mark.parametrize("page, prefix", [("README.md", ""), ("docs/index.md", "../")])
def test_the_headline_table_is_the_shipped_models_evaluations(page, prefix):
    text = (ROOT / page).read_text()
    rows = re.findall(r"^\| \[([\w.-]+)\]\(" + re.escape(prefix) + r"models/\1/README\.md\) \|[^|\n]*\| "
                      r"\*\*(\d+) / (\d+)\*\* \| (\d+) / (\d+) \|$", text, re.MULTILINE)
    assert [r[0] for r in rows] == ["PointMaze_Large-v3", "AntMaze_UMaze-v5", "AntMaze_Medium-v5"]
    for name, l3p, n, policy, n_policy in rows:
        modes = json.loads((ROOT / "models" / name / EVAL).read_text())["modes"]
        assert (int(l3p), int(n)) == (modes["l3p"]["successes"], modes["l3p"]["episodes"]), name
        assert (int(policy), int(n_policy)) == (modes["policy"]["successes"], modes["policy"]["episodes"]), name


def test_the_results_index_gives_every_models_held_out_numbers():
    text = (ROOT / "docs" / "results" / "index.md").read_text()
    rows = re.findall(r"^\| \[([\w.-]+)\]\(\.\./\.\./models/\1/README\.md\) \| \*\*(\d+) / (\d+)\*\* \| "
                      r"(\d+) / (\d+) \|", text, re.MULTILINE)
    assert sorted(r[0] for r in rows) == sorted(m.name for m in MODELS)
    for name, l3p, n, policy, n_policy in rows:
        modes = json.loads((ROOT / "models" / name / EVAL).read_text())["modes"]
        assert (int(l3p), int(n)) == (modes["l3p"]["successes"], modes["l3p"]["episodes"]), name
        assert (int(policy), int(n_policy)) == (modes["policy"]["successes"], modes["policy"]["episodes"]), name


def test_the_card_command_needs_only_the_base_install():
    assert cli.BY_NAME["card"].extra == ""
    code = ("import sys, l3p.cards, l3p.cli; heavy = sorted({m.split('.')[0] for m in sys.modules} & "
            "{'grpc', 'google', 'onnxruntime', 'torch', 'gymnasium', 'mujoco', 'matplotlib'}); print(heavy)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd="/")
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr


def test_a_report_missing_what_a_card_needs_is_a_one_line_error(model_copy):
    report = json.loads((model_copy / EVAL).read_text())
    del report["modes"]["naive"]["successes"]
    (model_copy / EVAL).write_text(json.dumps(report))
    proc = l3p_card(str(model_copy))
    assert proc.returncode == 2, proc.stderr
    assert re.fullmatch(r"l3p card: error: .*lacks what a card needs \(KeyError: 'successes'\).*\n", proc.stderr)


def test_the_ogbench_results_page_is_the_offline_models_evaluations():
    """docs/results/ogbench.md puts our rows beside the published ones: each of ours is the card's file."""
    text = (ROOT / "docs" / "results" / "ogbench.md").read_text()
    cell = r"(?:\*\*)?(\d+) / (\d+) \((\d+) %\)(?:\*\*)?"
    rows = re.findall(r"^\| [^|`]*`([\w@=.]+)`[^|]*\| " + cell + r" \| " + cell + r" \|", text, re.MULTILINE)
    assert [r[0] for r in rows] == ["l3p", "l3p@search=hard", "naive", "policy"]
    for variant, *cells in rows:
        for name, (k, n, pct) in zip(("pointmaze-large-stitch", "pointmaze-giant-stitch"), (cells[:3], cells[3:])):
            mode = json.loads((ROOT / "models" / name / EVAL).read_text())["modes"][variant]
            assert (int(k), int(n)) == (mode["successes"], mode["episodes"]), (name, variant)
            assert int(pct) == round(100 * mode["successes"] / mode["episodes"]), (name, variant)


@pytest.mark.parametrize("model", ["antmaze-large-navigate", "antmaze-giant-stitch"])
def test_the_ogbench_ant_rows_are_the_ant_cards_files(model):
    """docs/results/ogbench.md's table of each ant model: the served seed's variants and the mean ± std
    (worst) over its training seeds are models/<model>'s eval_heldout.json and seeds/."""
    text = (ROOT / "docs" / "results" / "ogbench.md").read_text()
    section = text[text.index(f"## The ant: {model}"):]
    section = section[:section.index("\n## ", 1)] if "\n## " in section[1:] else section
    model_dir = ROOT / "models" / model
    served = json.loads((model_dir / EVAL).read_text())["modes"]
    rows = re.findall(r"^\| [^|]*`(\w+)` \(ours\) \| (?:\*\*)?(\d+) / (\d+) \((\d+) %\)(?:\*\*)? \|",
                      section, re.MULTILINE)
    assert [r[0] for r in rows] == ["l3p", "naive", "policy"]
    for variant, k, n, pct in rows:
        mode = served[variant]
        assert (int(k), int(n), int(pct)) == (mode["successes"], mode["episodes"],
                                              round(100 * mode["successes"] / mode["episodes"])), variant
    reports = [served] + [json.loads(p.read_text())["modes"] for p in sorted((model_dir / "seeds").glob(f"*/{EVAL}"))]
    assert len(reports) == 3
    for label, variant in (("`l3p` mean ± std", "l3p"), ("its actor alone", "policy")):
        row = next(line for line in section.splitlines() if line.startswith("| ") and f"recipe, {label}" in line)
        rates = [100 * r[variant]["successes"] / r[variant]["episodes"] for r in reports]
        mean, std = mean_and_population_std(rates)
        assert f"{mean:.1f} ± {std:.1f} %" in row, row
        if variant == "l3p":
            assert f"(worst {min(rates):.0f} %)" in row, row


def mean_and_population_std(values: list[float]) -> tuple[float, float]:
    mean = sum(values) / len(values)
    return mean, (sum((x - mean) ** 2 for x in values) / len(values)) ** 0.5


def test_other_training_seeds_make_a_seeds_table_with_mean_and_std(model_copy):
    """seeds/<seed>/ holds another training seed's manifest and its evaluation on the same episodes: the
    card lists each seed and the mean ± std (population std) of the success rates."""
    manifest = json.loads((model_copy / "manifest.json").read_text())
    report = json.loads((model_copy / EVAL).read_text())
    served_l3p = report["modes"]["l3p"]
    for seed, successes in ((1, served_l3p["successes"] - 8), (2, served_l3p["successes"] + 2)):
        seed_dir = model_copy / "seeds" / str(seed)
        seed_dir.mkdir(parents=True)
        m = json.loads(json.dumps(manifest))
        m["provenance"]["seed"] = seed
        (seed_dir / "manifest.json").write_text(json.dumps(m))
        r = json.loads(json.dumps(report))
        r["modes"]["l3p"]["successes"] = successes
        (seed_dir / EVAL).write_text(json.dumps(r))
    card = render(model_copy)
    n = served_l3p["episodes"]
    mean, std = mean_and_population_std(
        [100 * k / n for k in (served_l3p["successes"], served_l3p["successes"] - 8, served_l3p["successes"] + 2)])
    assert "## Training seeds" in card
    assert "| 2 | " in card and f"{served_l3p['successes'] + 2} / {n}" in card
    assert f"{mean:.1f} ± {std:.1f} %" in card
    assert "(their weights are not shipped)" in card
    # With every seed's graphs beside its manifest, each seed is a bundle to serve.
    for seed in (1, 2):
        for entry in manifest["files"].values():
            shutil.copy(model_copy / entry["path"], model_copy / "seeds" / str(seed) / entry["path"])
    assert (f"(each a whole bundle: `l3p serve --bundle models/{model_copy.name}/seeds/<seed>`)"
            in render(model_copy))
    # Seeds compare on the same episodes only.
    r = json.loads((model_copy / "seeds" / "2" / EVAL).read_text())
    r["episodes"] += 1
    (model_copy / "seeds" / "2" / EVAL).write_text(json.dumps(r))
    with pytest.raises(CardError, match="seed 2's evaluation differs from the served one's in episodes"):
        render(model_copy)


def test_the_ogbench_seed_rows_are_the_training_seeds_evaluations():
    """The mean ± std rows of docs/results/ogbench.md's first table are each maze's four training seeds'
    evaluations (the card's own and seeds/), in the table's column order (large, giant)."""
    text = (ROOT / "docs" / "results" / "ogbench.md").read_text()
    for label, variant, mazes in (("L3P by the recipe, mean ± std", "l3p", ("large", "giant")),
                                  ("its actor alone, mean ± std", "policy", ("large",))):
        row = next(line for line in text.splitlines() if line.startswith(f"| {label}"))
        cells = []
        for maze in mazes:
            model = ROOT / "models" / f"pointmaze-{maze}-stitch"
            reports = [json.loads((model / EVAL).read_text())] + [
                json.loads(p.read_text()) for p in sorted((model / "seeds").glob(f"*/{EVAL}"))]
            assert len(reports) == 4
            mean, std = mean_and_population_std(
                [100 * r["modes"][variant]["successes"] / r["modes"][variant]["episodes"] for r in reports])
            cells.append(f"{mean:.1f} ± {std:.1f} %")
        assert re.search(r".*\|.*".join(re.escape(c) for c in cells), row), (row, cells)


def _seed_run(maze: str, seed: int, export: str) -> tuple[dict, dict]:
    """(manifest, held-out l3p row) of one training seed's export: the recipe's (the served model,
    seeds/<seed>/) or the settings chosen for seed 0 (docs/measurements/.../every-pair/)."""
    if export == "recipe":
        model = ROOT / "models" / f"pointmaze-{maze}-stitch"
        base = model if seed == 0 else model / "seeds" / str(seed)
    else:
        base = ROOT / "docs" / "measurements" / f"pointmaze-{maze}-stitch-s{seed}" / "every-pair"
    manifest = json.loads((base / "manifest.json").read_text())
    assert manifest["provenance"]["seed"] == seed
    return manifest, json.loads((base / EVAL).read_text())["modes"]["l3p"]


def _cell(row: dict) -> str:
    return f"{row['successes']} / {row['episodes']} ({round(100 * row['successes'] / row['episodes'])} %)"


def test_the_ogbench_seed_rows_are_the_cards_and_measurements_files():
    """docs/results/ogbench.md's per-seed table: each training seed's held-out success with the settings
    chosen for seed 0 (before) and by the recipe (after, the card's files) and the recipe's d_max, and
    the mean ± std rows; the sensitivity table's 0.75x / 1.5x cells are eval_sensitivity.json's."""
    text = (ROOT / "docs" / "results" / "ogbench.md").read_text().splitlines()
    for maze in ("giant", "large"):
        rates = {"before": [], "after": []}
        for seed in range(4):
            row = next(line for line in text if line.startswith(f"| {maze} | {seed}"))
            after_manifest, after = _seed_run(maze, seed, "recipe")
            before_manifest, before = _seed_run(maze, seed, "every-pair")
            cells = [c.strip().strip("*") for c in row.strip("|").split("|")]
            assert cells[2] == f"{_cell(before)} at {before_manifest['planner']['d_max']:g}", row
            assert cells[3] == _cell(after) and cells[4] == f"{after_manifest['planner']['d_max']:g}", row
            rates["before"].append(100 * before["successes"] / before["episodes"])
            rates["after"].append(100 * after["successes"] / after["episodes"])
        row = next(line for line in text if line.startswith(f"| {maze} | mean ± std"))
        for key in ("before", "after"):
            mean, std = mean_and_population_std(rates[key])
            assert f"{mean:.1f} ± {std:.1f} %" in row, row
    for maze, seed in (("giant", 1), ("large", 0)):
        for export, label in (("every-pair", "the settings chosen for seed 0"), ("recipe", "the recipe")):
            manifest, one = _seed_run(maze, seed, export)
            d_max = manifest["planner"]["d_max"]
            folder = "every-pair" if export == "every-pair" else "data-graph"
            sens = json.loads((ROOT / "docs" / "measurements" / f"pointmaze-{maze}-stitch-s{seed}" / folder /
                               "eval_sensitivity.json").read_text())["modes"]
            low, high = (v for v in sens if v.startswith("l3p@d_max="))
            assert [float(v.split("=")[1]) for v in (low, high)] == [round(0.75 * d_max, 2), round(1.5 * d_max, 2)]
            cells = [f"{sens[v]['successes']} / {sens[v]['episodes']} at {float(v.split('=')[1]):g}"
                     for v in (low, high)]
            line = (f"| {maze} seed {seed}, {label} (d_max {d_max:g}) | {cells[0]} | {one['successes']} / "
                    f"{one['episodes']} | {cells[1]} |")
            assert line in text, line


def test_the_online_models_planner_option_rows_are_their_measurements():
    """docs/results/ogbench.md's rows for the online models re-evaluated with the recipe's planner
    options are docs/measurements/planner-options/'s held-out files, on the cards' own bundles."""
    text = (ROOT / "docs" / "results" / "ogbench.md").read_text().splitlines()
    for name in ("PointMaze_Large-v3", "AntMaze_UMaze-v5", "AntMaze_Medium-v5"):
        report = json.loads((ROOT / "docs" / "measurements" / "planner-options" / f"{name}-heldout.json").read_text())
        manifest = json.loads((ROOT / "models" / name / "manifest.json").read_text())
        assert report["model"]["bundle_sha256"] == bundle_digest(manifest) and report["seed"] >= 2_000_000_000
        served, options = (report["modes"][v] for v in ("l3p", "l3p@local_cut=0.5@follow_edges=true"))
        row = next(line for line in text if line.startswith(f"| [{name}]"))
        assert row.endswith(f"| {served['successes']} / {served['episodes']} | "
                            f"{options['successes']} / {options['episodes']} |"), row
