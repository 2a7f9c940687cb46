"""Job keys, the fallback chain and the [prediction] settings table."""

from __future__ import annotations

import pytest

from retry_bot.predict import JobKey, KeySettings, SpecError, extract_key, parse_spack_spec, parse_prediction_settings
from retry_bot.predict.keys import GENERIC_LEVELS, GENERIC_NAME_PATTERNS
from retry_bot.predict.settings import DEFAULT_SETTINGS


def test_gantry_spec_is_parsed_with_canonical_variants():
    got = parse_spack_spec("py-torch@2.2.1 ~rocm+cuda build_system=cmake cuda_arch=80 "
                           "arch=linux-ubuntu22.04-x86_64_v3%gcc@12.3.0")
    assert got == {"package": "py-torch", "version": "2.2.1", "variants": "+cuda~rocm build_system=cmake cuda_arch=80",
                   "arch": "linux-ubuntu22.04-x86_64_v3", "compiler": "gcc@12.3.0"}


@pytest.mark.parametrize("bad", ["", "   ", "no-version-here", "@1.0 +x", "pkg@1.0 +x; rm -rf /"])
def test_invalid_specs_are_rejected_with_a_message(bad):
    with pytest.raises(SpecError):
        parse_spack_spec(bad)


def test_spack_variables_win_over_the_job_name_and_compiler_is_joined():
    key = extract_key(KeySettings(), job_name="zlib@1.3 /abcdefg %gcc@11.4.0 arch=linux-x E4S",
                      variables={"SPACK_JOB_SPEC_PKG_NAME": "zlib-ng", "SPACK_JOB_SPEC_COMPILER_NAME": "clang",
                                 "SPACK_JOB_SPEC_COMPILER_VERSION": "17", "SPACK_JOB_SPEC_VARIANTS": "~shared+pic"})
    assert key.get("package") == "zlib-ng"
    assert key.get("compiler") == "clang@17"
    assert key.get("version") == "1.3"          # from the name, as no variable gives it
    assert key.get("variants") == "+pic~shared"


def test_fallback_levels_are_most_specific_first():
    key = JobKey.of({"package": "hdf5", "version": "1.14", "variants": "", "compiler": "gcc@12"})
    lv = KeySettings().levels
    filled = [i for i, level in enumerate(lv) if key.level_key(level) is not None]
    assert filled[0] == 1                                    # no arch: level 0 is skipped
    assert key.level_key(lv[filled[-1]]) == ("hdf5",)       # the least specific Spack level
    # the generic levels at the end serve jobs that are not Spack builds, never Spack keys
    assert [lv[i] for i in range(len(lv)) if "job" in lv[i]] == [("project", "job"), ("job",)]
    generic = JobKey.of({"job": "build", "project": "g/p"})
    assert [generic.level_key(level) for level in lv if generic.level_key(level)] == [("g/p", "build"), ("build",)]


def test_generic_extraction_uses_named_groups():
    ks = KeySettings(levels=GENERIC_LEVELS, variables={}, name_patterns=GENERIC_NAME_PATTERNS)
    key = extract_key(ks, job_name="test:unit 3/8", project="group/app")
    assert key.level_key(("project", "job")) == ("group/app", "test:unit")


def test_settings_defaults_and_quantities():
    s, problems = parse_prediction_settings({"half_life_hours": 24, "oom_min_bump_bytes": "200Mi",
                                             "trusted_refs": ["main", "release/.*"]})
    assert problems == []
    assert s.oom_min_bump_bytes == 200 * 2**20
    assert s.trusts("release/1.2") and not s.trusts("pr-12") and s.trusts("pr-12", protected=True)
    assert parse_prediction_settings(None)[0] == DEFAULT_SETTINGS


def test_settings_problems_name_key_and_line():
    text = "[prediction]\nhalf_life_hours = -1\nbogus = 2\ntrusted_refs = ['(']\n"
    table = {"half_life_hours": -1, "bogus": 2, "trusted_refs": ["("]}
    s, problems = parse_prediction_settings(table, "prediction", text)
    paths = {p.path: p for p in problems}
    assert set(paths) == {"prediction.half_life_hours", "prediction.bogus", "prediction.trusted_refs[0]"}
    assert paths["prediction.half_life_hours"].line == 2
    assert s.half_life_hours == DEFAULT_SETTINGS.half_life_hours   # bad value -> default kept


def test_key_table_is_validated():
    s, problems = parse_prediction_settings({"keys": {"extract": "generic", "name_patterns": ["no groups"]}})
    assert [p.path for p in problems] == ["prediction.keys.name_patterns[0]"]
    s, problems = parse_prediction_settings({"keys": {"extract": "generic", "levels": [["job"]]}})
    assert problems == [] and s.keys.levels == (("job",),)


def test_policy_file_prediction_table_is_read_and_checked(tmp_path, capsys):
    from retry_bot.cli import main as cli_main
    from retry_bot.predict.sources import load_policy_and_settings, settings_from_policy

    good = tmp_path / "p.toml"
    good.write_text('[prediction]\nhalf_life_hours = 24\noom_cost = 10\n\n[prediction.keys]\nextract = "generic"\n')
    policy, s = load_policy_and_settings(str(good))
    assert s.half_life_hours == 24 and s.oom_cost == 10 and s.keys.levels[-1] == ("job",)
    assert settings_from_policy(policy) == s
    bad = tmp_path / "bad.toml"
    bad.write_text('[prediction]\nmin_samples = "three"\n')
    assert cli_main(["simulate", "--trace", str(good), "--policy", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad.toml:2: prediction.min_samples" in err and "Traceback" not in err


def test_predict_command_explains(tmp_path, capsys):
    import json
    from retry_bot.cli import main as cli_main
    from tests.bot_predict.conftest import make_records, write_trace

    path = write_trace(tmp_path / "t.jsonl", make_records(200, seed=4))
    assert cli_main(["predict", "--trace", str(path), "--job-name",
                     "beta@1.0 /zzzzzzz %gcc@12.3.0 arch=linux-ubuntu22.04-x86_64_v3 E4S", "--format", "json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["source"] == "history" and got["samples"] >= 3 and got["key"].startswith("package=beta")
    assert got["memory_limit_bytes"] > got["memory_request_bytes"]
    assert set(got["variables"]) >= {"KUBERNETES_MEMORY_REQUEST", "KUBERNETES_MEMORY_LIMIT"}
    assert cli_main(["predict", "--trace", str(path), "--job-name", "beta@1.0 /z %gcc@12.3.0"]) == 0
    out = capsys.readouterr().out
    assert "memory limit" in out and "why:" in out
    assert cli_main(["predict", "--var", "BROKEN"]) == 2
