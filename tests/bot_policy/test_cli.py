"""``retry-bot policy check|show|init`` through the real command-line parser."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from retry_bot.cli import main
from retry_bot.policy import default_policy, default_policy_text, parse_policy

REPO = Path(__file__).resolve().parents[2]


def test_check_ok(capsys):
    assert main(["policy", "check", str(REPO / "config" / "policy.toml")]) == 0
    assert capsys.readouterr().out.strip() == "OK"


def test_check_reports_every_problem_and_exits_2(tmp_path, capsys):
    f = tmp_path / "p.toml"
    f.write_text('dry_runn = true\n[families.oom]\naction = "resise"\nbudget = 30\n')
    assert main(["policy", "check", str(f)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"{f}:1: dry_runn: unknown key; did you mean 'dry_run'?"
    assert err[1].startswith(f"{f}:3: families.oom.action: 'resise' is not one of")
    assert err[2].startswith(f"{f}:4: families.oom.budget: 30 is out of range")
    assert err[3] == "3 problems found"


def test_check_missing_and_unparsable_files(tmp_path, capsys):
    assert main(["policy", "check", str(tmp_path / "nope.toml")]) == 2
    assert "file not found" in capsys.readouterr().err
    f = tmp_path / "broken.toml"
    f.write_text("[resize\n")
    assert main(["policy", "check", str(f)]) == 2
    assert "not valid TOML" in capsys.readouterr().err


def test_show_prints_the_effective_policy(tmp_path, capsys):
    f = tmp_path / "p.toml"
    f.write_text('[families.oom]\nbudget = 5\n')
    assert main(["policy", "show", str(f)]) == 0
    out = capsys.readouterr().out
    data = tomllib.loads(out)
    assert data["families"]["oom"] == {"action": "resize", "budget": 5,
                                       "backoff": {"initial": "0s", "factor": 2.0, "max": "1h"}}
    assert data["resize"]["ratio"] == 1.5 and data["variables"]["memory_format"] == "binary"
    assert parse_policy(out).families["oom"].budget == 5
    # Without a file: the built-in default.
    assert main(["policy", "show"]) == 0
    assert parse_policy(capsys.readouterr().out) == default_policy()


def test_show_invalid_file_exits_2(tmp_path, capsys):
    f = tmp_path / "p.toml"
    f.write_text("max_attempts = 'many'\n")
    assert main(["policy", "show", str(f)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "max_attempts" in captured.err


def test_init_writes_and_refuses_to_overwrite(tmp_path, capsys):
    out = tmp_path / "policy.toml"
    assert main(["policy", "init", "--output", str(out)]) == 0
    assert out.read_text() == default_policy_text()
    out.write_text("# mine\n")
    assert main(["policy", "init", "--output", str(out)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert out.read_text() == "# mine\n"
    assert main(["policy", "init", "--output", str(out), "--force"]) == 0
    assert out.read_text() == default_policy_text()
    assert not list(tmp_path.glob(".*tmp*"))


def test_init_to_stdout_and_bad_destinations(tmp_path, capsys):
    assert main(["policy", "init", "--output", "-"]) == 0
    assert capsys.readouterr().out == default_policy_text()
    assert main(["policy", "init", "--output", str(tmp_path)]) == 2
    assert "directory" in capsys.readouterr().err
    assert main(["policy", "init", "--output", str(tmp_path / "no" / "such" / "dir.toml")]) == 2
    assert "cannot write" in capsys.readouterr().err


def test_policy_without_subcommand_prints_usage(capsys):
    assert main(["policy"]) == 2
    assert "check" in capsys.readouterr().err


def test_entry_point_in_a_real_process(tmp_path):
    f = tmp_path / "p.toml"
    f.write_text("[resize]\nratio = 0.5\n")
    proc = subprocess.run([sys.executable, "-m", "retry_bot", "policy", "check", str(f)],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 2, proc.stderr
    assert f"{f}:2: resize.ratio:" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_shipped_and_empty_policies_check_clean(tmp_path, capsys):
    # Issue 13: the shipped policy warned about itself (resize.default_memory is not set).
    f = tmp_path / "p.toml"
    f.write_text("")
    for path in (REPO / "config" / "policy.toml", f):
        assert main(["policy", "check", str(path)]) == 0
        out, err = capsys.readouterr()
        assert out.strip() == "OK" and err == ""


def test_check_warns_when_oom_jobs_without_figures_cannot_be_resized(tmp_path, capsys):
    f = tmp_path / "p.toml"
    f.write_text('[resize]\nunknown_limit = "none"\n')
    assert main(["policy", "check", str(f)]) == 0
    err = capsys.readouterr().err
    assert 'warning: resize.unknown_limit is "none"' in err
    f.write_text('[resize]\nunknown_limit = "none"\ndefault_memory = "8Gi"\n')
    assert main(["policy", "check", str(f)]) == 0
    assert "warning" not in capsys.readouterr().err
