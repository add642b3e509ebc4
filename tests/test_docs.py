"""The docs site (mkdocs.yml, docs/): `mkdocs build --strict` passes, so a broken link, a missing
page or an API reference that no longer resolves fails the test suite; the model cards are pages
of the site; the command reference names every command."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from l3p import cli

ROOT = Path(__file__).resolve().parents[1]
MODELS = sorted(p.parent.name for p in (ROOT / "models").glob("*/README.md"))


def build(config: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], capture_output=True, text=True, timeout=300,
                          cwd=config.parent, env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1"})


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    site = tmp_path_factory.mktemp("site")
    proc = build(ROOT / "mkdocs.yml", site)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return site


def test_the_strict_build_has_every_page(site):
    for page in ("index.html", "install/index.html", "guides/training/index.html", "guides/own-env/index.html",
                 "guides/robot/index.html", "guides/fleet/index.html", "guides/deploy/index.html",
                 "guides/scaling/index.html", "reference/cli/index.html", "reference/protocol/index.html",
                 "bundle/index.html", "planner_api/index.html", "reference/metrics/index.html",
                 "reference/api/index.html", "results/index.html", "results/serving/index.html",
                 "results/training/index.html"):
        assert (site / page).is_file(), page


def test_every_model_card_is_a_page_with_its_pictures_and_files(site):
    assert len(MODELS) >= 7
    home = (site / "index.html").read_text()
    for name in MODELS:
        page = site / "models" / name / "index.html"
        assert page.is_file(), name
        assert f'href="models/{name}/"' in home  # the Models section of the nav
        for picture in (ROOT / "models" / name).glob("*.png"):
            assert (site / "models" / name / picture.name).is_file(), picture
        assert (site / "models" / name / "eval_heldout.json").is_file()
    # links written for GitHub (../../docs/planner_api.md from a card) point at the site's pages
    card = (site / "models" / "PointMaze_Large-v3" / "index.html").read_text()
    assert 'href="../../planner_api/"' in card and 'src="maze_episode.png"' in card


def test_the_api_reference_is_generated_from_docstrings(site):
    api = (site / "reference" / "api" / "index.html").read_text()
    for text in ("PlannerClient", "timeout_s", "stream_episode", "EpisodePlanner", "TrainConfig",
                 "default deadline of every call"):  # the last: PlannerClient's docstring
        assert text in api, text


def test_the_site_fetches_nothing_from_elsewhere(site):
    for page in site.rglob("*.html"):
        text = page.read_text()
        assert "fonts.googleapis" not in text and "fonts.gstatic" not in text, page


def test_no_code_block_or_table_overflows_its_column_at_desktop_and_phone_widths(site):
    """scripts/check_pages.py renders the key pages in headless Chromium at 1280 and 390 px."""
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        pytest.skip("no Chromium (apt-get install chromium; scripts/test installs it as root)")
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "check_pages.py"), "--site", str(site)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert proc.stdout.splitlines()[-1] == "0 overflowing code blocks, tables or broken names"


def test_a_broken_link_fails_the_build(tmp_path):
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    (tmp_path / "models").symlink_to(ROOT / "models", target_is_directory=True)
    for folder in ("apps", "core", "protos", "sim", "training", "serving", "clients"):
        (tmp_path / folder).symlink_to(ROOT / folder, target_is_directory=True)
    install = tmp_path / "docs" / "install.md"
    install.write_text(install.read_text() + "\nSee [the old page](guides/no-such-page.md).\n")
    proc = build(tmp_path / "mkdocs.yml", tmp_path / "site")
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output[-4000:]
    assert "contains a link 'guides/no-such-page.md'" in output and "Aborted with 1 warnings in strict mode" in output


def test_the_command_reference_names_every_command():
    text = (ROOT / "docs" / "reference" / "cli.md").read_text()
    for command in cli.COMMANDS:
        assert f"| `l3p {command.name}` |" in text, command.name


def test_the_readme_links_resolve_in_the_repository():
    """The README is read on GitHub, outside the site: its relative links name files that exist."""
    text = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", text)
    assert len(links) > 20
    for link in links:
        if "://" not in link:
            assert (ROOT / link).exists(), link


def test_the_pages_ask_for_the_python_pyproject_requires_and_installs_that_work_from_a_checkout():
    """No index serves l3p-service: an install line names the checkout (``.``) or a wheel file."""
    import tomllib

    required = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    version = re.fullmatch(r">=(3\.\d+)", required)[1]
    pages = [ROOT / "README.md", ROOT / "scripts" / "demo", *sorted((ROOT / "docs").rglob("*.md"))]
    for page in pages:
        text = page.read_text()
        for found in re.findall(r"Python (?:≥|>=) ?(3\.\d+)", text):
            assert found == version, page
        assert not re.search(r"pip install[^\n`]*'l3p-service\[", text), page
    assert f"Python ≥ {version}" in (ROOT / "README.md").read_text()
    assert f"Python ≥ {version}" in (ROOT / "docs" / "install.md").read_text()
    assert f"needs Python >= {version}" in (ROOT / "scripts" / "demo").read_text()
