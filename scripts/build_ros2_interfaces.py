"""Build the bridge's ROS 2 action type (clients/ros2/interfaces/l3p_interfaces) for the ``[ros2]`` wheels.

A pip install cannot run a rosidl build, so the build is shipped: this script makes it once, with the
rosidl generators that come with the ``[ros2]`` wheels (the code CMake's ``rosidl_generate_interfaces``
would generate) and the system's C and C++ compilers, into clients/ros2/interfaces/built/:

- ``l3p_interfaces/``: the Python package (``from l3p_interfaces.action import ReachGoal``) and its
  C extension;
- ``lib/``: the C libraries: the message functions, the typesupports Fast DDS uses (fastrtps_c for
  the bytes, introspection_c for its type objects) and the typesupport_c dispatcher between them;
- ``BUILT.json``: the .action's sha256 and the ROS wheels built against, which
  ``l3p.clients.ros2.action_type`` checks before loading the build.

Run it again after changing the .action or the ``[ros2]`` pins: ``.venv/bin/python scripts/build_ros2_interfaces.py``
(needs gcc, g++ and the Python headers). Under a system ROS 2, build the package with colcon instead.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from importlib.metadata import version
from pathlib import Path

import numpy

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "l3p_interfaces"
SOURCE = ROOT / "clients" / "ros2" / "interfaces" / PACKAGE
ACTION = Path("action/ReachGoal.action")
OUT = ROOT / "clients" / "ros2" / "interfaces" / "built"
# The interface packages ReachGoal's messages and services use (an action adds action_msgs' and
# unique_identifier_msgs' types, a Kilted service its service_msgs event info).
DEPENDENCIES = ("std_msgs", "builtin_interfaces", "action_msgs", "unique_identifier_msgs", "service_msgs")
TYPESUPPORTS = ("rosidl_typesupport_fastrtps_c", "rosidl_typesupport_introspection_c")
# The wheels whose ABI the build links against: BUILT.json records their versions.
WHEELS = ("ros-rclpy", "ros-rosidl-runtime-c", "ros-rosidl-typesupport-c", "ros-rosidl-typesupport-fastrtps-c",
          "ros-rosidl-typesupport-introspection-c", "ros-fastcdr", *(f"ros-{d.replace('_', '-')}" for d in DEPENDENCIES))


def generate(work: Path) -> dict[str, Path]:
    """Every generator's sources under ``work``, one folder each (their file names overlap), as CMake does."""
    from rosidl_adapter.action import convert_action_to_idl
    from rosidl_generator_c import generate_c
    from rosidl_generator_py import generate_py
    from rosidl_generator_type_description import generate_type_hash
    from rosidl_typesupport_c import generate_c as generate_typesupport_c
    from rosidl_typesupport_fastrtps_c import generate_typesupport_fastrtps_c
    from rosidl_typesupport_introspection_c import generate_c as generate_introspection_c

    share = Path(sys.prefix) / "share"
    idl_root = work / "idl"
    (idl_root / ACTION.parent).mkdir(parents=True)
    convert_action_to_idl(SOURCE, PACKAGE, ACTION, idl_root / ACTION.parent)
    idl = ACTION.with_suffix(".idl").as_posix()
    dependencies = [f"{d}:{f}" for d in DEPENDENCIES for f in sorted((share / d).glob("*/*.idl"))]
    out = {name: work / name / PACKAGE for name in ("description", "c", "fastrtps_c", "introspection_c",
                                                    "typesupport_c", "py")}

    def arguments(name: str, templates: str, **more: object) -> str:
        path = work / f"{name}.json"
        path.write_text(json.dumps({
            "package_name": PACKAGE, "output_dir": str(out[name]), "template_dir": str(share / templates / "resource"),
            "idl_tuples": [f"{idl_root}:{idl}"], "ros_interface_dependencies": dependencies,
            "target_dependencies": [], **more}))
        return str(path)

    generate_type_hash(arguments("description", "rosidl_generator_type_description",
                                 include_paths=[f"{d}:{share / d}" for d in DEPENDENCIES]))
    descriptions = [f"{idl}:{out['description'] / ACTION.with_suffix('.json')}"]
    generate_c(arguments("c", "rosidl_generator_c", type_description_tuples=descriptions,
                         ros_interface_files=[str(SOURCE / ACTION)]))
    generate_typesupport_fastrtps_c(arguments("fastrtps_c", "rosidl_typesupport_fastrtps_c"))
    generate_introspection_c(arguments("introspection_c", "rosidl_typesupport_introspection_c"))
    generate_typesupport_c(arguments("typesupport_c", "rosidl_typesupport_c"), list(TYPESUPPORTS))
    generate_py(arguments("py", "rosidl_generator_py"), ["rosidl_typesupport_c"])
    # The headers CMake configures from templates: each generator's export macros for this package.
    for folder, template in (("c", "rosidl_generator_c"), ("fastrtps_c", "rosidl_typesupport_fastrtps_c"),
                             ("introspection_c", "rosidl_typesupport_introspection_c")):
        text = (share / template / "resource" / f"{template}__visibility_control.h.in").read_text()
        header = out[folder] / "msg" / f"{template}__visibility_control.h"
        header.parent.mkdir(parents=True, exist_ok=True)
        header.write_text(text.replace("@PROJECT_NAME_UPPER@", PACKAGE.upper()).replace("@PROJECT_NAME@", PACKAGE))
    return out


def compile_library(name: str, sources: list[Path], includes: list[Path], libraries: list[str], lib: Path,
                    work: Path, *, load_with: list[str] = (), extension: Path | None = None) -> None:
    """``sources`` compiled and linked into ``lib/lib{name}.so`` (or the Python ``extension``), which finds
    its sibling libraries in ``lib`` and the ROS wheels' libraries on LD_LIBRARY_PATH (set by the wheels'
    bootstrapper, or a sourced ROS 2 install); ``load_with``: libraries it loads though it calls none."""
    prefix = Path(sys.prefix)
    flags = ["-O2", "-fPIC", *(f"-I{i}" for i in includes),
             # the export macros of each generated part (CMake's BUILDING_DLL definitions)
             *(f"-D{macro}_BUILDING_DLL_{PACKAGE}" for macro in (
                 "ROSIDL_GENERATOR_C", "ROSIDL_TYPESUPPORT_FASTRTPS_C", "ROSIDL_TYPESUPPORT_INTROSPECTION_C")),
             "-DROSIDL_TYPESUPPORT_C_BUILDING_DLL"]
    objects = []
    for source in sources:
        obj = work / "obj" / name / (source.name + ".o")
        obj.parent.mkdir(parents=True, exist_ok=True)
        compiler = ["g++", "-std=c++17"] if source.suffix == ".cpp" else ["gcc", "-std=c11"]
        subprocess.run([*compiler, *flags, "-c", str(source), "-o", str(obj)], check=True)
        objects.append(str(obj))
    if extension is None:
        target, rpath = lib / f"lib{name}.so", "$ORIGIN"
        # Named, so that a dlopen of its file name finds it loaded; every symbol resolved at link time.
        own = [f"-Wl,-soname,lib{name}.so", "-Wl,--no-undefined"]
    else:  # Python's own symbols come from the interpreter
        target, rpath, own = extension, f"$ORIGIN/{os.path.relpath(lib, extension.parent)}", []
    subprocess.run(["g++", "-shared", "-o", str(target), *objects, f"-L{prefix / 'lib'}", f"-L{lib}",
                    *(f"-l{x}" for x in libraries), "-Wl,--no-as-needed", *(f"-l{x}" for x in load_with),
                    "-Wl,--as-needed", f"-Wl,-rpath,{rpath}", *own, "-s"], check=True)


def build(out_dir: Path) -> None:
    prefix = Path(sys.prefix)
    with tempfile.TemporaryDirectory(prefix="l3p-interfaces-") as tmp:
        work = Path(tmp)
        gen = generate(work)
        include = prefix / "include"
        includes = [*(g.parent for g in gen.values()), include, *sorted(p for p in include.iterdir() if p.is_dir())]
        stage = work / "built"
        lib = stage / "lib"
        lib.mkdir(parents=True)

        def sources(folder: str, suffixes: tuple[str, ...] = (".c", ".cpp")) -> list[Path]:
            return sorted(p for p in gen[folder].rglob("*") if p.suffix in suffixes)

        def deps(part: str) -> list[str]:
            return [f"{d}__{part}" for d in DEPENDENCIES]

        base = ["rosidl_runtime_c", "rcutils"]
        generator_c = f"{PACKAGE}__rosidl_generator_c"
        compile_library(generator_c, sources("c"), includes, [*deps("rosidl_generator_c"), *base], lib, work)
        for typesupport, extra in (("fastrtps_c", ["fastcdr"]), ("introspection_c", [])):
            part = f"rosidl_typesupport_{typesupport}"
            compile_library(f"{PACKAGE}__{part}", sources(typesupport), includes,
                            [generator_c, part, *extra, *deps(part), *deps("rosidl_generator_c"), *base], lib, work)
        # typesupport_c's dispatcher dlopens each typesupport by its file name, which the dynamic loader
        # resolves to a library already loaded under that name: the dispatcher brings both along.
        dispatcher = f"{PACKAGE}__rosidl_typesupport_c"
        compile_library(dispatcher, sources("typesupport_c"), includes,
                        [generator_c, "rosidl_typesupport_c", *deps("rosidl_typesupport_c"), *base], lib, work,
                        load_with=[f"{PACKAGE}__{t}" for t in TYPESUPPORTS])
        python = stage / PACKAGE
        shutil.copytree(gen["py"], python, ignore=shutil.ignore_patterns("*.c"))
        (python / "__init__.py").touch()
        split_by_message(python / "action" / "_reach_goal.py")
        extension = python / f"{PACKAGE}_s__rosidl_typesupport_c{sysconfig.get_config_var('EXT_SUFFIX')}"
        compile_library("py", sources("py", (".c",)), [*includes, Path(sysconfig.get_paths()["include"]),
                                                       Path(numpy.get_include())],
                        [generator_c, dispatcher, *deps("rosidl_generator_py"), *deps("rosidl_typesupport_c"),
                         *deps("rosidl_generator_c"), "rosidl_typesupport_c", *base], lib, work, extension=extension)
        (stage / "BUILT.json").write_text(json.dumps({
            "action": ACTION.as_posix(),
            "action_sha256": hashlib.sha256((SOURCE / ACTION).read_bytes()).hexdigest(),
            "python": sysconfig.get_config_var("EXT_SUFFIX"),
            "wheels": {w: version(w) for w in WHEELS},
        }, indent=2) + "\n")
        shutil.rmtree(out_dir, ignore_errors=True)
        shutil.copytree(stage, out_dir)
    print(f"built {PACKAGE} into {out_dir.relative_to(ROOT) if out_dir.is_relative_to(ROOT) else out_dir}")


def split_by_message(module: Path) -> None:
    """rosidl_generator_py writes an action's 14 message classes into one module of ~2,000 lines: each
    (its metaclass and class) goes into a module of its own beside it, ``_reach_goal_send_goal_request.py``
    and so on, which ``module`` imports back; the action class stays in ``module``. The generated code
    imports its siblings lazily from ``module``, so every name it looks up there is still found."""
    text = module.read_text()
    parts = re.split(r"(?m)^(?=class Metaclass_)", text)
    header, chunks = parts[0], parts[1:]
    package = f"{PACKAGE}.action"
    action = module.stem.lstrip("_")  # reach_goal
    kept, imports = [], []
    for chunk in chunks:
        name = re.match(r"class Metaclass_(\w+)\(type\)", chunk)[1]  # ReachGoal_SendGoal_Request
        _, _, message = name.partition("_")
        if not message:  # the action itself
            kept.append(chunk)
            continue
        snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", message).lower()  # send_goal__request
        child = f"{module.stem}_{re.sub(r'_+', '_', snake)}"
        (module.parent / f"{child}.py").write_text(header + chunk.rstrip() + "\n")
        imports.append(f"from {package}.{child} import Metaclass_{name}, {name}  # noqa: E402, F401\n")
    assert imports and kept, f"{module}: no message classes of action {action} found"
    module.write_text(header + "".join(imports) + "\n\n" + "".join(kept))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help="where the build goes (default: %(default)s)")
    build(parser.parse_args().out.resolve())


if __name__ == "__main__":
    main()
