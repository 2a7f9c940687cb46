"""The lean ``executor run`` path: same records and markers as the full modules, few imports,
the environment checked before the script runs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runner_wrapper import record as record_mod
from runner_wrapper.accounting import build_record, host_dict, host_info, record_dict
from runner_wrapper.cgroup.base import Counters, Sample
from runner_wrapper.lean import Record
from runner_wrapper.marker import MARKER_MAX_BYTES, marker_line
from runner_wrapper.stagerun import stage_group_name
from runner_wrapper.state import JobState, StageFigures

from .conftest import make_payload, v1_usable, write_config
from .driver import job_dir

KEY = b"lean-key-0123456789"


def _state(n_stages: int = 3) -> JobState:
    stages = [StageFigures(f"step_{i}", 1, 1.5 + i, 0 if i else 3, oom_kills=i % 2, memory_peak_bytes=(i + 1) * 2**20,
                           memory_mean_bytes=(i + 1) * 2**19 if i else None, cpu_user_seconds=0.25 * i,
                           cpu_system_seconds=0.125, cpu_max_cores=1.5 if i else None, memory_failcnt=i)
              for i in range(n_stages)]
    return JobState(job_id=77, backend="cgroup-v1", started_at="2026-01-01T00:00:00Z", started_epoch=1000.0,
                    identity={"id": 77, "project_id": 7, "project_path": "group/p", "pipeline_id": 9,
                              "name": "build", "stage": "build", "ref": "main", "protected": True, "url": None,
                              "variables": {"KUBERNETES_MEMORY_LIMIT": "2Gi"}},
                    limits={"memory_limit_bytes": 2**31, "memory_request_bytes": None, "cpu_limit_cores": 1.5,
                            "cpu_request_cores": None, "sources": {"memory_limit": "job variable"}},
                    stages=stages)


@pytest.mark.parametrize("counters", [None, Counters(memory_peak_bytes=9 * 2**20, oom_kills=2, cpu_user_seconds=5.0,
                                                      cpu_system_seconds=1.0)])
def test_record_dict_is_exactly_the_records_to_dict(counters):
    host = host_dict("cgroup-v1", False, "", "runner-1")
    lean = record_dict(_state(), host, 1100.0, "2026-01-01T00:01:40Z", counters)
    full = build_record(_state(), host_info("cgroup-v1", False, "", "runner-1"), 1100.0, "2026-01-01T00:01:40Z",
                        counters).to_dict()
    assert json.dumps(lean, sort_keys=True) == json.dumps(full, sort_keys=True, default=list)
    assert record_mod.UsageRecord.from_dict(lean).to_dict() == full


def test_the_lean_paths_marker_verifies_and_fits():
    host = host_dict("cgroup-v1", False)
    for n in (1, 3, 60):  # 60 stages do not fit in 4 KiB: the stages are dropped and the record re-signed
        rec = record_dict(_state(n), host, 1100.0, "2026-01-01T00:01:40Z")
        line = marker_line(rec, KEY, "farm")
        assert len(line) + 1 <= MARKER_MAX_BYTES
        got = record_mod.find_markers(line)[0]
        assert record_mod.verify_record(got, {"farm": KEY}).job.id == 77
        assert got["stages_truncated"] is (n == 60)
    huge = record_dict(_state(1), host, 1100.0, "x")
    huge["job"]["variables"] = {f"V{i}": "x" * 100 for i in range(60)}
    with pytest.raises(ValueError):
        marker_line(huge, KEY, "farm")


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20)


@given(_JSON)
def test_canonical_json_is_json_dumps(value):
    from runner_wrapper.marker import canonical_json

    assert canonical_json(value) == json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                                               allow_nan=False).encode("utf-8")


def test_canonical_json_refuses_what_json_refuses():
    from runner_wrapper.marker import canonical_json

    for bad in (float("nan"), {"a": float("inf")}, {1: "x"}, {"a": object()}):
        with pytest.raises((ValueError, TypeError)):
            canonical_json(bad)
    assert canonical_json(("a", 1)) == b'["a",1]'


@given(st.binary(max_size=200), st.binary(max_size=3000))
def test_lean_hmac_is_hmac_sha256(key, message):
    import hashlib
    import hmac

    from runner_wrapper.marker import hmac_sha256_hex

    assert hmac_sha256_hex(key, message) == hmac.new(key, message, hashlib.sha256).hexdigest()


@pytest.mark.parametrize("stage", ["build_script", "step_a b//c", "__x  y__", "", "é@@ü_a", "a" * 100, "step_*"])
def test_stage_group_name_keeps_the_old_rule(stage):
    old = re.sub(r"[^A-Za-z0-9_.-]+", "_", stage)[:80] or "stage"
    assert stage_group_name(5, stage, 2) == f"job-5/{old}-2"


def test_lean_records_behave_like_named_tuples():
    s = StageFigures("build_script", 1, 2.0, 0, memory_peak_bytes=5)
    assert s.oom_kills == 0 and s.memory_peak_bytes == 5 and s._asdict()["name"] == "build_script"
    assert s == StageFigures(**s._asdict()) and s._replace(attempt=2).attempt == 2 and s != s._replace(attempt=2)
    assert tuple(Sample(1, 2.0)) == (1, 2.0) and hash(Sample(1, 2.0)) == hash(Sample(1, 2.0))
    with pytest.raises(AttributeError):
        s.name = "x"  # type: ignore[misc]
    with pytest.raises(TypeError, match="missing required argument 'exit_code'"):
        StageFigures("a", 1, 2.0)
    with pytest.raises(TypeError, match="unexpected keyword"):
        Sample(1, 2, bogus=3)
    assert isinstance(Counters(), Record) and Counters().oom_kills == 0 and "Counters(" in repr(Counters())


FORBIDDEN = {"typing", "argparse", "base64", "hashlib", "hmac", "_hashlib", "json", "structlog", "tomllib", "dataclasses", "enum", "re", "socket", "decimal",
             "runner_wrapper.config", "runner_wrapper.record", "runner_wrapper.executor", "logging"}


@pytest.mark.slow
@pytest.mark.cgroup
@pytest.mark.parametrize("stage", ["get_sources", "build_script"])
def test_run_imports_nothing_heavy(tmp_path, cg_parent, stage):
    """The driver starts once per stage: ``executor run`` must not import typing, enum, re, argparse,
    structlog, TOML, dataclasses or the configuration classes (compared with a bare interpreter)."""
    cfg = write_config(tmp_path, cg_parent)
    jd = job_dir(tmp_path, cfg, make_payload(881))
    config = json.loads(jd.call("config").stdout)
    jd.env.update(config["job_env"])
    assert jd.call("prepare").returncode == 0
    script = jd.script("s.sh", "echo hi")
    probe = ("import sys\nbase = set(sys.modules)\nfrom runner_wrapper.cli import main\n"
             f"rc = main(['--config', {str(cfg)!r}, 'executor', 'run', {str(script)!r}, {stage!r}])\n"
             "sys.stderr.write('\\nLOADED %d %s\\n' % (rc, ' '.join(sorted(set(sys.modules) - base))))\n")
    bare = subprocess.run([sys.executable, "-c", "import sys; print(' '.join(sorted(sys.modules)))"],
                          capture_output=True, env=jd.env)
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, env=jd.env, cwd=jd.tmpdir)
    last = [ln for ln in p.stderr.decode().splitlines() if ln.startswith("LOADED ")][-1].split()
    rc, loaded = int(last[1]), last[2:]
    assert rc == 0, p.stdout
    pre_loaded = set(bare.stdout.decode().split())
    heavy = (set(loaded) - pre_loaded) & FORBIDDEN
    assert not heavy, f"executor run {stage} imported {sorted(heavy)}"
    assert (b"RIGHTSIZER-USAGE v1 " in p.stdout) is (stage == "build_script")
    jd.call("cleanup")


def _prepared_job(tmp_path, parent, backend="auto", job_id=882):
    cfg = write_config(tmp_path, parent, backend=backend)
    jd = job_dir(tmp_path, cfg, make_payload(job_id))
    jd.env.update(json.loads(jd.call("config").stdout)["job_env"])
    assert jd.call("prepare").returncode == 0
    return jd


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["auto", "psutil"])  # the lean path (cgroups) and the full path (psutil)
def test_exit_code_file_runners_before_17_9_and_stale_codes(tmp_path, backend):
    """Issue 10 points 2 and 6.  A runner older than 17.9 sets no BUILD_EXIT_CODE_FILE: the stage runs
    anyway and fails with the build-failure code (GitLab records 1).  The runner never deletes the file
    between stages (gitlab-runner executors/custom/command/command.go), so each ``run`` starts by
    removing an earlier stage's code: a later failure must never be reported with it."""
    if backend == "auto" and v1_usable():
        pytest.skip(v1_usable())
    parent = f"rightsizer-test-{os.getpid()}-ecf-{backend}"
    try:
        jd = _prepared_job(tmp_path, parent, backend)
        ran = tmp_path / "script-ran"
        script = jd.script("s.sh", f"touch {ran}\nexit 3")
        del jd.env["BUILD_EXIT_CODE_FILE"]
        p = jd.call("run", str(script), "build_script")
        assert p.returncode == 7, p.stdout  # the build-failure code: GitLab records exit code 1
        assert ran.exists(), "a runner older than 17.9 could not run any job"
        assert b"BUILD_EXIT_CODE_FILE is not set (GitLab Runner older than 17.9)" in p.stdout
        ran.unlink()
        jd.env["BUILD_EXIT_CODE_FILE"] = str(tmp_path / "no-such-dir" / "code")
        p = jd.call("run", str(script), "build_script")
        assert p.returncode == 9 and b"does not exist" in p.stdout and not ran.exists()
        jd.env["BUILD_EXIT_CODE_FILE"] = str(jd.exit_code_file)
        p = jd.call("run", str(script), "build_script")
        assert p.returncode == 7 and ran.exists() and jd.exit_code_file.read_text().strip() == "3"
        # A later stage that passes leaves the file empty (a stray exit 1 then reads as a system
        # failure, per parseBuildFailure); one that the driver fails before the script
        # (here: a script path that cannot run) can never be read as the earlier stage's 3.
        ok = jd.script("ok.sh", "true")
        p = jd.call("run", str(ok), "after_script")
        assert p.returncode == 0 and jd.exit_code_file.read_text() == ""
        jd.exit_code_file.write_text("3\n")  # as an earlier failing stage leaves it
        p = jd.call("run", str(tmp_path / "missing-script.sh"), "upload_artifacts_on_failure")
        assert p.returncode == 7 and jd.exit_code_file.read_text().strip() == "127"
        jd.call("cleanup")
    finally:
        for ctrl in ("memory", "cpu", "cpuacct"):
            for d in (f"/sys/fs/cgroup/{ctrl}/{parent}/job-882", f"/sys/fs/cgroup/{ctrl}/{parent}"):
                if os.path.isdir(d):
                    os.rmdir(d)


@pytest.mark.slow
def test_cleanup_says_where_the_record_went_when_spool_and_collector_fail(tmp_path):
    """Unwritable spool + collector down: an error naming the job-log marker as the only copy,
    never "kept in the spool only"; and no secret in the log."""
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the spool directory should be")  # unwritable even for root
    cfg = write_config(tmp_path, "unused", backend="psutil")
    text = cfg.read_text().replace(f'spool = "{tmp_path / "spool" / "usage.jsonl"}"',
                                   f'spool = "{blocker / "usage.jsonl"}"\ncollector_url = "http://127.0.0.1:9/v1"'
                                   f'\ncollector_attempts = 1\ncollector_timeout = 0.5')
    cfg.write_text(text)
    jd = job_dir(tmp_path, cfg, make_payload(883))
    jd.env["RIGHTSIZER_COLLECTOR_TOKEN"] = "collector-token-secret-1"
    jd.env.update(json.loads(jd.call("config").stdout)["job_env"])
    assert jd.call("prepare").returncode == 0
    assert jd.call("run", str(jd.script("s.sh", "true")), "build_script").returncode == 0
    cmd = jd.cmd("cleanup")
    p = subprocess.run(cmd[:3] + ["--log-format", "json"] + cmd[3:], env=jd.env, cwd=jd.tmpdir,
                       capture_output=True, timeout=60)
    events = [json.loads(ln) for ln in p.stderr.decode().splitlines() if ln.startswith("{")]
    names = {e["event"]: e for e in events}
    assert "usage record kept in the spool only" not in names, events
    only = names["usage record in the job-log marker only"]
    assert only["level"] == "error" and "write failed" in only["spool"] and "127.0.0.1:9" in only["collector"]
    assert "collector-token-secret-1" not in p.stderr.decode() and "sig-key-for-tests" not in p.stderr.decode()


def test_secrets_are_registered_with_the_redactor(tmp_path):
    from runner_wrapper.config import load_config
    from runner_wrapper.executor import register_secrets
    from runner_wrapper.job import job_from_payload
    from runner_wrapper.logconfig import redact

    cfg = load_config(str(write_config(tmp_path, "unused", backend="psutil")))
    register_secrets(cfg, {"RIGHTSIZER_SIGNING_KEY": "signing-key-abc", "RIGHTSIZER_COLLECTOR_TOKEN": "coll-tok-123",
                           "RIGHTSIZER_ALLOCATION_TOKEN": "alloc-tok-456"})
    payload = make_payload(884)
    payload["token"] = "glcbt-job-token-789"
    payload["variables"].append({"key": "DEPLOY_PASSWORD", "value": "masked-value-000", "masked": True})
    job_from_payload(payload)
    line = "signing-key-abc coll-tok-123 alloc-tok-456 glcbt-job-token-789 masked-value-000 plain"
    assert redact(line) == "*** *** *** *** *** plain"


@pytest.mark.parametrize("head,expected", [
    (b'{"id":4242,"token":"x","variables":[]}', 4242),
    (b'{ "id" : 17 , "token": "x"}', 17),
    (b'{"id":5}', 5),
    (b'{"token":"x","id":4242}', None),  # another field order: the full path parses the file
    (b'{"id":"4242"}', None), (b'{"id":0,', None), (b'{"id":-3,', None), (b'{"id":12x', None),
    (b'[{"id":1}]', None), (b'', None), (b'{"id":1234567890123456789012,', None),
])
def test_job_id_is_read_from_the_head_of_the_response_file_or_not_at_all(tmp_path, head, expected):
    from runner_wrapper.stagerun import read_job_id

    f = tmp_path / "response.json"
    f.write_bytes(head)
    assert read_job_id(str(f)) == expected
    assert read_job_id(str(tmp_path / "missing.json")) is None
    if expected is not None:
        assert json.loads(head)["id"] == expected


def test_stage_settings_handover_roundtrips_and_is_refused_for_another_file(tmp_path):
    from runner_wrapper.config import config_from_mapping
    from runner_wrapper.stagerun import StageSettings, decode_settings, encode_settings

    cfg = config_from_mapping({"executor": {"shell": ["bash", "-e"], "state_dir": "/x"},
                               "signing": {"key_env": "K"}}, source="/etc/w.toml")
    s = StageSettings.from_config(cfg)
    text = encode_settings(s, "/etc/w.toml")
    back = decode_settings(text, "/etc/w.toml")
    assert back is not None and all(getattr(back, n) == getattr(s, n) for n in StageSettings.__slots__)
    assert back.shell == ("bash", "-e") and "K" in back.hidden_env and "RUNNER_WRAPPER_STAGE_SETTINGS" in back.hidden_env
    assert decode_settings(text, "/etc/other.toml") is None
    assert decode_settings("zz-not-hex", "/etc/w.toml") is None and decode_settings("00ff", "/etc/w.toml") is None
    literal = StageSettings.from_config(config_from_mapping({"signing": {"key": "literal-key"}}))
    assert decode_settings(encode_settings(literal, None), str(tmp_path / "absent.toml")).key == ""


def test_state_file_roundtrips_and_a_foreign_file_reads_as_no_state(tmp_path):
    from runner_wrapper.state import load_state, save_state

    p = str(tmp_path / "job-77.state")
    save_state(p, _state(4))
    back = load_state(p)
    assert back is not None and back.stages == _state(4).stages and back.identity == _state(4).identity
    for junk in (b"", b"RWSTATE1\n\x00garbage", b'{"job_id": 77}', b"RWSTATE1\n" + b"\xe9" * 10):
        (tmp_path / "job-77.state").write_bytes(junk)
        assert load_state(p) is None
