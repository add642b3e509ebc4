"""The `l3p` command: its table of commands, lazy imports, the missing-extra line, one error
prefix and one exit-code mapping. (Real installs of one extra alone: tests/test_packaging.py.)"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from l3p import cli
from l3p.core.errors import INTERRUPTED, UNAVAILABLE, USAGE, L3PError
from l3p.core.names import install_hint

ROOT = Path(__file__).resolve().parents[1]
NAMES = ["train", "export", "keygen", "sign", "rollback", "dataset", "expert", "serve", "run", "eval", "models", "plot", "demo", "card", "ros2"]


def l3p(*args: str, prelude: str = "") -> subprocess.CompletedProcess:
    code = f"import sys\n{prelude}\nfrom l3p.cli import main\nsys.exit(main({list(args)!r}))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd="/")


def test_the_table_names_every_command_once_with_an_extra_the_package_declares():
    assert [c.name for c in cli.COMMANDS] == NAMES
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for command in cli.COMMANDS:
        # "" is the base install (no extra): the command needs only the standard library and l3p.core
        assert command.help and set(filter(None, command.extra.split(","))) <= set(extras), command
        module = cli.load(command)  # the dev install has every extra
        assert callable(cli.declared_options(command)) and callable(getattr(module, command.run))


def test_help_lists_every_command_without_importing_any():
    loaded = ("import json; heavy = [m for m in sys.modules if m.split('.')[0] in "
              "('torch', 'onnxruntime', 'gymnasium', 'mujoco', 'grpc', 'matplotlib') or m in "
              f"{sorted({c.module for c in cli.COMMANDS})!r}]; print('LOADED', json.dumps(heavy))")
    code = ("import sys\nfrom l3p.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit as exc:\n"
            f"    code = exc.code\n{loaded}\nsys.exit(code)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd="/",
                          env={**os.environ, "COLUMNS": "300"})
    assert proc.returncode == 0, proc.stderr
    help_text, _, loaded_line = proc.stdout.rpartition("LOADED ")
    assert json.loads(loaded_line) == []
    for command in cli.COMMANDS:
        assert re.search(rf"^ +{command.name} +{re.escape(command.help)}$", help_text, re.MULTILINE), command.name
    assert "bench" not in help_text.split("examples:")[0]
    assert "python benchmarks/serve_latency.py" in help_text


@pytest.mark.parametrize("name", NAMES)
def test_each_command_help_in_the_dev_install(name, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main([name, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: l3p {name} ")


def test_python_dash_m_l3p_and_the_console_script_are_the_same_command():
    proc = subprocess.run([sys.executable, "-m", "l3p", "--help"], capture_output=True, text=True, timeout=120, cwd="/")
    assert proc.returncode == 0 and "usage: l3p [-h] [--version] COMMAND ..." in proc.stdout
    script = Path(sys.executable).with_name("l3p")
    proc = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=120, cwd="/")
    assert proc.returncode == 0 and "usage: l3p [-h] [--version] COMMAND ..." in proc.stdout
    proc = subprocess.run([str(script), "bench", "serve"], capture_output=True, text=True, timeout=120, cwd="/")
    assert proc.returncode == USAGE and "invalid choice: 'bench'" in proc.stderr


HIDE = """
import importlib.abc
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {hidden!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Hide())
"""


@pytest.mark.parametrize("argv, hidden, extra, module", [
    (["serve", "--port", "1", "--bundle", "x"], ["onnxruntime"], "serve", "onnxruntime"),
    (["run", "--episodes", "3", "--no-such-option"], ["gymnasium"], "sim", "gymnasium"),
    (["demo", "--episodes", "1"], ["onnxruntime", "gymnasium", "mujoco"], "serve,sim", "gymnasium|onnxruntime"),
    (["plot", "--bundle", "x"], ["grpc_health"], "serve,sim", "grpc_health"),  # the child server's extra
    (["train", "--env", "FetchReach-v4"], ["torch"], "train", "torch"),
])
def test_a_missing_extra_is_one_line_naming_it_whatever_the_options(argv, hidden, extra, module):
    """A package that is not installed (hidden from the import system in a fresh process) makes
    the command name its extra, before looking at any option."""
    proc = l3p(*argv, prelude=HIDE.format(hidden=hidden))
    noun = "extra" if "," not in extra else "extras"
    assert proc.returncode == USAGE
    assert re.fullmatch(rf"l3p {argv[0]}: error: needs the '{extra}' {noun} \(missing module '({module})'\): "
                        rf"{re.escape(install_hint(extra))}\n", proc.stderr), proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize("name, hidden, extra, option", [
    ("train", ["torch"], "train", "--resume RUN_DIR"),
    ("export", ["torch"], "train", "--landmarks {centroids,gls,centred}"),
    ("serve", ["onnxruntime"], "serve", "--max-sessions N"),
    ("run", ["gymnasium"], "sim", "--no-progress"),
    ("eval", ["gymnasium"], "sim", "--modes MODE,..."),
    ("plot", ["onnxruntime"], "serve,sim", "--landmarks-only"),
    ("demo", ["gymnasium"], "serve,sim", "--no-progress"),
])
def test_help_lists_the_options_and_names_a_missing_extra(name, hidden, extra, option):
    proc = l3p(name, "--help", prelude=HIDE.format(hidden=hidden))
    assert proc.returncode == 0 and proc.stdout.startswith(f"usage: l3p {name} "), proc.stderr
    assert option in proc.stdout
    assert f"this install cannot run it: it needs the '{extra}' extra" in " ".join(proc.stdout.split())


# The modules each extra brings that a command needs at once (hidden: the extra is not installed).
EXTRA_MODULES = {"train": ["torch"], "serve": ["onnxruntime"], "sim": ["gymnasium", "mujoco", "ogbench"],
                 "ros2": ["rclpy"], "": []}


@pytest.mark.parametrize("command", cli.COMMANDS, ids=lambda c: c.name)
def test_every_help_works_without_its_extra(command):
    hidden = [m for extra in command.extra.split(",") for m in EXTRA_MODULES[extra]]
    proc = l3p(command.name, "--help", prelude=HIDE.format(hidden=hidden))
    assert proc.returncode == 0 and proc.stdout.startswith(f"usage: l3p {command.name} "), proc.stderr
    assert proc.stderr == ""


def _options(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", text))


def test_dataset_help_lists_both_forms_options_without_their_extras():
    """`l3p dataset` splits NAME from the rest; its --help still lists every option of both forms
    (the generator's, which runs in the sim extra, and import's), with neither extra installed."""
    from l3p.dataset_command import generator_parser, import_parser

    hidden = EXTRA_MODULES["sim"] + ["pyarrow", "h5py", "rosbags", "yaml"]
    proc = l3p("dataset", "--help", prelude=HIDE.format(hidden=hidden))
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    for parser in (generator_parser(), import_parser()):
        declared = {s for action in parser._actions for s in action.option_strings if s.startswith("--")}
        assert declared - {"--help"} <= _options(proc.stdout), declared - _options(proc.stdout)
    assert {"--expert", "--episodes", "--no-progress", "--mapping", "--report"} <= _options(proc.stdout)


def test_install_hints_name_the_form_for_a_checkout_and_for_a_wheel(monkeypatch):
    """pip records where a distribution came from (PEP 610's direct_url.json): the hint gives the
    command for that source, and the other form beside it; never the index name alone."""
    from l3p.core import names

    monkeypatch.setattr(names, "_installed_from", lambda: ("/src/l3p", True))
    assert names.install_hint("serve") == ("pip install -e '.[serve]' in the checkout /src/l3p "
                                           "(with a wheel: pip install 'WHEEL.whl[serve]')")
    monkeypatch.setattr(names, "_installed_from", lambda: ("/dist/l3p_service-0.1.0-py3-none-any.whl", False))
    assert names.install_hint("ros2,sim") == (
        "pip install '/dist/l3p_service-0.1.0-py3-none-any.whl[ros2,sim]' (the wheel this install came from; "
        "in a checkout: pip install -e '.[ros2,sim]')")
    monkeypatch.setattr(names, "_installed_from", lambda: (None, False))
    assert names.install_hint("sim").startswith("pip install -e '.[sim]' in a checkout, or ")


def test_version():
    from importlib import metadata

    proc = subprocess.run([sys.executable, "-m", "l3p", "--version"], capture_output=True, text=True, timeout=60,
                          cwd="/")
    assert (proc.returncode, proc.stdout) == (0, f"l3p-service {metadata.version('l3p-service')}\n")


def test_other_commands_work_when_one_extra_is_missing():
    proc = l3p("run", "--help", prelude=HIDE.format(hidden=["onnxruntime", "torch"]))
    assert proc.returncode == 0 and proc.stdout.startswith("usage: l3p run ")


@pytest.fixture
def probe_command(tmp_path, monkeypatch):
    """A command module of our own in the table: it fails as its --fail option says."""
    (tmp_path / "probe_cmd.py").write_text(
        "from l3p.core.errors import L3PError, UNAVAILABLE\n"
        "class Down(L3PError):\n    exit_code = UNAVAILABLE\n"
        "def add(parser):\n    parser.add_argument('--fail', default='')\n"
        "def run(args):\n"
        "    if args.fail == 'usage': raise L3PError('bad value for --fail')\n"
        "    if args.fail == 'down': raise Down('server 127.0.0.1:1 unreachable')\n"
        "    if args.fail == 'interrupt': raise KeyboardInterrupt\n"
        "    if args.fail == 'int': return 3\n"
        "    return None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    command = cli.Command("probe", "a test command", "probe_cmd", "add", "run", "serve")
    monkeypatch.setitem(cli.BY_NAME, "probe", command)
    return command


@pytest.mark.parametrize("fail, code, err", [
    ("", 0, ""),
    ("int", 3, ""),
    ("usage", USAGE, "l3p probe: error: bad value for --fail\n"),
    ("down", UNAVAILABLE, "l3p probe: error: server 127.0.0.1:1 unreachable\n"),
    ("interrupt", INTERRUPTED, "l3p probe: interrupted\n"),
])
def test_one_error_prefix_and_one_exit_code_mapping(probe_command, capsys, fail, code, err):
    assert cli.main(["probe", "--fail", fail]) == code
    assert capsys.readouterr().err == err


def test_a_bad_option_is_argparse_usage_under_the_command_name(probe_command, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["probe", "--nope"])
    assert exit_.value.code == USAGE
    assert "l3p probe: error: unrecognized arguments: --nope" in capsys.readouterr().err


def test_a_missing_module_of_our_own_is_a_bug_not_an_extra(monkeypatch):
    monkeypatch.setitem(cli.BY_NAME, "ghost", cli.Command("ghost", "x", "l3p.no_such_module", "a", "r", "serve"))
    with pytest.raises(ModuleNotFoundError):
        cli.main(["ghost"])


def test_real_commands_fail_with_the_prefix(tmp_path):
    proc = l3p("export", str(tmp_path / "no-run"), str(tmp_path / "bundle"))
    assert proc.returncode == USAGE and proc.stderr.startswith("l3p export: error: ") and proc.stderr.count("\n") == 1
    proc = l3p("train", "--env", "FetchReach-v4", "--set", "batch_size", "--out", str(tmp_path / "run"))
    assert proc.returncode == USAGE
    assert proc.stderr == "l3p train: error: --set expects key=value, got 'batch_size'\n"


@pytest.mark.parametrize("processes", ["1", "2"])
def test_serve_on_a_busy_port_is_one_line_through_either_entry_point(processes):
    """`l3p serve` and `python -m l3p.serving` (how LocalServer starts it) report alike."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        argv = ["--bundle", str(ROOT / "models" / "FetchPush-v4"), "--port", port, "--processes", processes]
        for entry in (["-m", "l3p", "serve"], ["-m", "l3p.serving"]):
            proc = subprocess.run([sys.executable, *entry, *argv], capture_output=True, text=True, timeout=120,
                                  cwd="/")
            errors = [line for line in proc.stderr.splitlines() if line.startswith("l3p serve: error: ")]
            assert proc.returncode == USAGE and len(errors) == 1 and "bind" in errors[0].lower(), proc.stderr


@pytest.mark.parametrize("argv, err", [
    (["run", "--tls-ca", "/nonexistent/ca.crt"],
     "l3p run: error: [Errno 2] No such file or directory: '/nonexistent/ca.crt'\n"),
    (["eval", "--token-file", "/nonexistent/robot.token"],
     "l3p eval: error: [Errno 2] No such file or directory: '/nonexistent/robot.token'\n"),
    (["demo", "--bundle", "/nonexistent"],
     "l3p demo: error: no model bundle at /nonexistent (missing manifest.json); pass --bundle DIR\n"),
    (["plot", "--bundle", "/nonexistent", "--landmarks-only"],
     "l3p plot: error: bundle /nonexistent: not a directory (No such file or directory)\n"),
])
def test_the_apps_fail_with_the_prefix_through_python_dash_m_l3p(argv, err):
    """The apps raise, the command prints: one prefixed line and the mapped exit code."""
    proc = subprocess.run([sys.executable, "-m", "l3p", *argv], capture_output=True, text=True, timeout=300, cwd="/")
    assert (proc.returncode, proc.stdout, proc.stderr) == (USAGE, "", err)


def test_l3p_error_is_the_base_of_expected_failures():
    from l3p.clients.errors import PlannerError, Unauthenticated
    from l3p.clients.runner import ConnectionConfigError, EnvMismatchError, ServerUnreachable
    from l3p.serving.local_server import ServerStartError
    from l3p.sim.envs import UnknownEnvError

    assert issubclass(cli.MissingExtra, L3PError) and cli.MissingExtra("x").exit_code == USAGE
    assert isinstance(cli.build_parser(), argparse.ArgumentParser)
    codes = {error: error.exit_code for error in (PlannerError, Unauthenticated, ServerUnreachable, ServerStartError,
                                                   EnvMismatchError, ConnectionConfigError, UnknownEnvError)}
    assert codes == {PlannerError: UNAVAILABLE, Unauthenticated: UNAVAILABLE, ServerUnreachable: UNAVAILABLE,
                     ServerStartError: UNAVAILABLE, EnvMismatchError: USAGE, ConnectionConfigError: USAGE,
                     UnknownEnvError: USAGE}
    assert all(issubclass(error, L3PError) for error in codes)
