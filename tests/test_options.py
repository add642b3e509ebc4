"""The option table (PlannerConfig's fields, core/options.py): what is derived from it (the config's
checks, the KEY=VALUE parsers, the planner API page, the proto's fields, the cards' labels) and the
refusal of a setting that does nothing, wherever settings come from."""
from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from option_values import example, examples, exclusions

from l3p.core.bundle_format import BundleError, planner_defaults
from l3p.core.config import EPISODE_OPTIONS, OPTIONS, PlannerConfig, parse_option, parse_options, parse_variant
from l3p.core.options import DeadOptionError, acting, markdown_table, without_dead
from l3p.core.overrides import OverrideError, parse_overrides, parse_pair
from l3p.protos import l3p_planner_pb2 as pb

ROOT = Path(__file__).resolve().parents[1]
DEAD = re.compile(r"^(\w+)=true makes (\w+) do nothing; drop one")


# ------------------------------------------------------------------------------------------- the table


def test_the_config_is_the_table():
    fields = dataclasses.fields(PlannerConfig)
    assert list(OPTIONS) == [f.name for f in fields]
    for f in fields:
        row = OPTIONS[f.name]
        assert row.default == f.default and f.metadata["doc"] == row.doc
        assert row.doc and "\n" not in row.doc, f"{f.name}: one line of doc"
        row.check(row.default)  # every default is in its own range
        row.check(example(f.name))
    PlannerConfig().validate()
    assert set(EPISODE_OPTIONS) == {n for n, row in OPTIONS.items() if row.per_episode} - {"mode"}


def test_an_exclusion_names_known_options_of_its_modes():
    for on, dead in exclusions():
        assert OPTIONS[on].kind == "bool" and dead in OPTIONS and dead != on
        assert set(OPTIONS[on].modes) & set(OPTIONS[dead].modes), f"{on} and {dead} share no mode"


def test_next_hop_makes_the_counters_and_the_picks_options_do_nothing():
    assert set(OPTIONS["next_hop"].excludes) == {"counter_extra", "sample_subgoal", "prune_failed",
                                                 "require_progress", "local_cut", "follow_edges", "prune_loops"}


def test_the_planner_api_page_has_the_tables_rows():
    page = (ROOT / "docs" / "planner_api.md").read_text()
    begin = page.index("<!-- options table:")
    shown = page[page.index("\n", begin) + 1:page.index("<!-- end of options table -->")]
    assert shown == markdown_table(OPTIONS), \
        "docs/planner_api.md's option table drifted from PlannerConfig; run: python scripts/options_table"
    for name in OPTIONS:
        assert f"| `{name}` |" in shown


def test_the_writer_of_the_page_checks_it(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "options_table"), "--check"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.endswith("up to date\n"), proc.stdout + proc.stderr


# ------------------------------------------------------------------------------------------- the proto

_WIRE = {"number": "TYPE_DOUBLE", "bool": "TYPE_BOOL", "int": "TYPE_INT32", "choice": "TYPE_ENUM"}
_PROTO = {"number": "double", "bool": "bool", "int": "int32"}
_ENUMS = {"mode": "PlannerMode", "search": "SearchKind"}


def proto_mismatches(message, names, optional: bool) -> list[str]:
    """What protos/l3p_planner.proto needs for ``message`` to carry ``names``, each a line to add."""
    fields = message.DESCRIPTOR.fields_by_name
    last = max(f.number for f in message.DESCRIPTOR.fields)
    wrong = []
    for name in names:
        kind = OPTIONS[name].kind
        wire = _ENUMS.get(name) if kind == "choice" else ("optional " if optional else "") + _PROTO[kind]
        field = fields.get(name)
        if field is None:
            last += 1
            wrong.append(f"{message.DESCRIPTOR.name} has no {name}: add `{wire} {name} = {last};`")
        elif field.type != getattr(field, _WIRE[kind]):
            wrong.append(f"{message.DESCRIPTOR.name}.{name} is not {wire}")
        elif optional and kind != "choice" and not field.has_presence:
            wrong.append(f"{message.DESCRIPTOR.name}.{name} is not optional (unset: the bundle's default)")
    return wrong


def test_the_proto_carries_every_option_of_the_table():
    """A field per per-episode option in EpisodeOptions, per option in PlannerDefaults; the message
    says what to add (then: bash scripts/protos)."""
    wrong = (proto_mismatches(pb.EpisodeOptions, ["mode", *EPISODE_OPTIONS], optional=True)
             + proto_mismatches(pb.PlannerDefaults, list(OPTIONS), optional=False))
    assert not wrong, "protos/l3p_planner.proto: " + "; ".join(wrong) + "; then run: bash scripts/protos"
    assert set(pb.EpisodeOptions.DESCRIPTOR.fields_by_name) == {"mode", "seed", *EPISODE_OPTIONS}
    assert set(pb.PlannerDefaults.DESCRIPTOR.fields_by_name) == {"n_landmarks", *OPTIONS}


def test_a_missing_field_is_named_with_the_line_to_add():
    assert proto_mismatches(pb.EpisodeOptions, ["counter_extra"], optional=True) == [
        "EpisodeOptions has no counter_extra: add `optional int32 counter_extra = 15;`"]


def test_the_proto_comments_hold_no_copy_of_an_options_doc():
    """The proto points at the table for what each option does: a copy would drift from it."""
    text = (ROOT / "protos" / "l3p_planner.proto").read_text()
    for message in ("EpisodeOptions", "PlannerDefaults"):
        body = text[text.index(f"message {message} {{"):]
        body = body[:body.index("}")]
        commented = [line.split("=")[0].split()[-1] for line in body.splitlines() if "//" in line and "=" in line]
        assert commented in ([], ["seed"]), f"{message}: comments on {commented}"


# ------------------------------------------------------------------------------ a setting that does nothing


@pytest.mark.parametrize("on, dead", exclusions())
def test_a_config_that_holds_a_setting_that_does_nothing_is_refused(on, dead):
    config = PlannerConfig(**{on: True, dead: example(dead)})
    if set(OPTIONS[dead].modes) <= set(OPTIONS[on].modes):
        with pytest.raises(DeadOptionError, match=f"^{on}=true makes {dead} do nothing; drop one$"):
            config.validate()
        with pytest.raises(DeadOptionError, match=f"^{on}=true makes {dead} do nothing; drop one$"):
            PlannerConfig().replace(**{on: True, dead: example(dead)})
    else:  # it acts in another mode of the bundle's (local_cut, sample_subgoal in naive): kept
        config.validate()


@pytest.mark.parametrize("on, dead", [p for p in exclusions() if OPTIONS[p[1]].per_episode])
def test_a_request_that_sets_a_setting_that_does_nothing_is_refused(on, dead):
    with pytest.raises(DeadOptionError, match=f"^{on}=true makes {dead} do nothing; drop one$"):
        PlannerConfig().for_episode(**{on: True, dead: example(dead)})
    bundle = PlannerConfig(**{on: True})  # the bundle serves it: the request's setting does nothing
    with pytest.raises(DeadOptionError, match=f"drop one \\({on}=true is a default here: drop {dead}, or add "
                                              f"{on}=false\\)$"):
        bundle.for_episode(**{dead: example(dead)})
    assert getattr(bundle.for_episode(**{on: False, dead: example(dead)}), dead) == example(dead)
    with pytest.raises(ValueError, match=f"^{on}=true makes {dead} do nothing; drop one in "):
        parse_variant(f"l3p@{on}=true@{dead}={json.dumps(example(dead))}")


def test_settings_over_others_turn_off_what_they_make_do_nothing():
    counter = PlannerConfig(prune_failed=True, follow_edges=True, prune_loops=True, local_cut=0.5)
    hop = counter.replace(next_hop=True)
    assert (hop.prune_failed, hop.follow_edges, hop.prune_loops) == (False, False, False)
    assert hop.local_cut == 0.5  # it still acts in a naive episode of the bundle
    assert counter.for_episode(next_hop=True) == hop
    assert counter.for_episode(mode="naive").follow_edges  # unused in naive, left as it is


def test_an_option_of_another_mode_is_refused_in_a_request():
    for name, row in OPTIONS.items():
        if name in EPISODE_OPTIONS:
            for mode in set(("l3p", "naive", "policy")) - set(row.modes):
                with pytest.raises(ValueError, match=f"^{name} applies to mode {' or '.join(row.modes)} only, "
                                                     f"not {mode}: leave it unset"):
                    PlannerConfig().for_episode(mode=mode, **{name: example(name)})


def test_a_bundle_that_serves_a_setting_that_does_nothing_is_refused_with_its_rebundle():
    manifest = {"planner": {"next_hop": True, "follow_edges": True, "prune_loops": True, "local_cut": 0.5}}
    with pytest.raises(BundleError) as err:
        planner_defaults(manifest)
    assert str(err.value) == ("manifest.json: 'planner' serves follow_edges, prune_loops beside next_hop=true, "
                              "which makes them do nothing; rebundle it without: l3p export BUNDLE OUT --planner "
                              "follow_edges=false prune_loops=false")
    mended = planner_defaults(manifest, {"follow_edges": False, "prune_loops": False})
    assert mended.next_hop and not mended.follow_edges and mended.local_cut == 0.5


def test_without_dead_tells_configs_the_planner_acts_alike_on():
    served = dataclasses.asdict(PlannerConfig(next_hop=True, follow_edges=True, prune_failed=True, local_cut=0.5))
    mended = dataclasses.asdict(PlannerConfig(next_hop=True, local_cut=0.5))
    assert without_dead(served, OPTIONS) == without_dead(mended, OPTIONS)
    assert without_dead(served, OPTIONS) != without_dead(dataclasses.asdict(PlannerConfig(next_hop=True)), OPTIONS)


def test_every_shipped_manifest_validates():
    manifests = sorted([*ROOT.glob("models/**/manifest.json"), *ROOT.glob("experts/**/manifest.json")])
    assert len(manifests) >= 20
    for path in manifests:
        planner_defaults(json.loads(path.read_text()))  # BundleError names the problem


def test_the_rebundled_giant_stitch_models_record_that_they_act_as_before():
    for path in sorted(ROOT.glob("models/antmaze-giant-stitch/**/manifest.json")):
        change = json.loads(path.read_text())["provenance"]["rebundled"][-1]
        assert change["same_actions"] is True and change["planner"] == {
            "prune_failed": False, "follow_edges": False, "prune_loops": False}, path


# ------------------------------------------------------------------------------------------- parsers


def test_one_key_value_parser():
    assert parse_pair("a=b=c") == ("a", "b=c")
    assert parse_pair(" d_max =3", lambda k, t: float(t)) == ("d_max", 3.0)
    with pytest.raises(OverrideError, match=r"^--set expects KEY=VALUE, got 'x'$"):
        parse_pair("x", flag="--set")
    with pytest.raises(OverrideError, match=r"^expected ROLE=KEY with ROLE one of a, b, got 'c=1'$"):
        parse_pair("c=1", keys=("a", "b"), form="ROLE=KEY")
    with pytest.raises(OverrideError, match=r"^bad value for n: 'x' \(no\)$"):
        parse_pair("n=x", lambda k, t: (_ for _ in ()).throw(ValueError("no")))
    assert parse_overrides(["batch_size=512", "search=hard", "x=[1, 2]"]) == {
        "batch_size": 512, "search": "hard", "x": [1, 2]}


def test_planner_options_parse_by_their_rows():
    assert parse_option("next_hop=True") == ("next_hop", True)
    assert parse_option("d_max=14") == ("d_max", 14.0) and isinstance(parse_option("d_max=14")[1], float)
    assert parse_options(["counter_extra=2", "search=hard"]) == {"counter_extra": 2, "search": "hard"}
    with pytest.raises(OverrideError, match=r"^--planner expects KEY=VALUE with KEY one of mode, d_max, .*got "
                                            r"'d_mx=3' \(did you mean 'd_max'\?\)$"):
        parse_options(["d_mx=3"])
    with pytest.raises(OverrideError, match=r"^--planner: bad value for next_hop: 'yes' \(expected true or false"):
        parse_options(["next_hop=yes"])
    assert parse_variant("l3p@search=hard@next_hop=true") == ("l3p", {"search": "hard", "next_hop": True})


def test_no_other_key_value_parser():
    """Every place that splits a KEY=VALUE setting calls core/overrides.py's parse_pair."""
    splitters = re.compile(r"""(partition|split)\(\s*["']=["']""")
    found = [f"{path.relative_to(ROOT)}" for folder in ("core", "serving", "clients", "training", "apps", "sim")
             for path in (ROOT / folder).rglob("*.py") if splitters.search(path.read_text())]
    assert found == ["core/overrides.py"], found


# ------------------------------------------------------------------------------------------- labels


def test_a_cards_label_lists_what_a_bundle_serves_that_acts():
    from l3p.card_report import variant_label

    served = dataclasses.asdict(PlannerConfig(d_max=20.0, prune_failed=True, follow_edges=True, local_cut=0.5))
    assert acting(served, OPTIONS, "l3p") == ["d_max", "prune_failed", "local_cut", "follow_edges"]
    assert acting(served, OPTIONS, "naive") == ["d_max", "local_cut"]
    assert variant_label("l3p", served) == ("`l3p` (served default: soft search, d_max 20, local horizon 10, "
                                            "`prune_failed`, `local_cut` 0.5, `follow_edges`)")
    hop = dataclasses.asdict(PlannerConfig(next_hop=True, local_cut=0.5))
    assert variant_label("l3p", hop) == "`l3p` (served default: soft search, d_max 15, local horizon 10, `next_hop`)"


def test_examples_act_together():
    PlannerConfig().for_episode(**examples())
    assert "next_hop" in examples() and "follow_edges" not in examples()


def test_the_servers_pairs_go_through_the_one_parser(capsys):
    from l3p.core.commandline import parse_config
    from l3p.serving.config import ServeConfig

    digest = "ab" * 32
    config = parse_config(ServeConfig, ["--bundle", "b", "--openpi-key", "goal=target", "--model-sha256", f"m={digest}"])
    assert ("goal", "target") in config.openpi_key and config.model_sha256 == (("m", digest),)
    for bad, message in ((["--openpi-key", "aim=target"], "expected ROLE=KEY with ROLE one of observation, goal"),
                         (["--openpi-key", "goal="], "bad value for goal: '' (expected a key)"),
                         (["--model-sha256", "m"], "expected NAME=HEX, got 'm'"),
                         (["--model-sha256", "m=12"], "expected 64 hex digits, got '12'")):
        with pytest.raises(SystemExit):
            parse_config(ServeConfig, ["--bundle", "b", *bad])
        assert message in capsys.readouterr().err, bad
