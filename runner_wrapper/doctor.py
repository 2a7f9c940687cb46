"""``runner-wrapper doctor``: what this host offers and what the wrapper will do with it."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Mapping

from runner_wrapper.config import WrapperConfig

__all__ = ["diagnose", "run_doctor"]


def diagnose(cfg: WrapperConfig, environ: Mapping[str, str]) -> dict[str, Any]:
    """Facts and the plan, as a dict (``--json``) that :func:`run_doctor` renders."""
    from runner_wrapper.cgroup.base import CgroupError
    from runner_wrapper.cgroup.detect import select_backend
    from runner_wrapper.cgroup.v2 import find_cgroup2_mount
    from runner_wrapper.quantity import human_bytes

    facts: dict[str, Any] = {"kernel": os.uname().release, "uid": os.getuid(),
                             "config": cfg.source or "built-in defaults (no wrapper.toml)"}
    v2 = cfg.cgroup.v2_root or find_cgroup2_mount()
    facts["cgroup2_mount"] = v2
    if v2:
        try:
            with open(os.path.join(v2, "cgroup.controllers")) as fh:
                facts["cgroup2_controllers"] = fh.read().split()
        except OSError:
            facts["cgroup2_controllers"] = []
    from runner_wrapper.cgroup.v1 import v1_hierarchies

    facts["cgroup_v1_hierarchies"] = v1_hierarchies(cfg.cgroup.v1_root)
    facts["cgroup_version"] = ("v2 (unified)" if v2 and not facts["cgroup_v1_hierarchies"] else
                               "hybrid (v1 controllers + cgroup2 mount)" if v2 else
                               "v1" if facts["cgroup_v1_hierarchies"] else "none")
    problems: list[str] = []
    try:
        sel = select_backend(cfg.cgroup, enforce_memory=cfg.executor.psutil_enforce_memory)
        # v2 probes memory.peak and cgroup.kill in a throw-away child: the root never has them (§11.5).
        facts["backend"] = sel.backend.describe()
        facts["selection"] = list(sel.reasons)
    except CgroupError as exc:
        problems.append(str(exc))
        facts["backend"] = None
        facts["selection"] = []
    key = cfg.signing.resolve_key(environ)
    facts["signing"] = (f"HMAC-SHA256 with key id {cfg.signing.key_id!r}" if key else
                        f"NO KEY (set [signing] key_file, ${cfg.signing.key_env} or [signing] key): records will be unsigned "
                        f"and the retry bot will ignore them")
    if not key:
        problems.append(cfg.signing.missing_key_reason())
    warnings: list[str] = []
    if key:  # can a build get this key, or change the figures it signs? (docs/usage-record.md, threat model)
        from runner_wrapper.isolation import protection_report

        summary, warns, probs = protection_report(cfg.signing, cfg.executor.builds_dir, cfg.executor.state_dir,
                                                  cfg.source)
        facts["record_protection"] = summary
        warnings += warns
        problems += probs
    elif cfg.signing.key_file:
        from runner_wrapper.isolation import read_key_file

        try:
            read_key_file(cfg.signing.key_file)
        except (OSError, ValueError) as exc:
            problems.append(f"[signing] key_file {cfg.signing.key_file}: {getattr(exc, 'strerror', None) or exc}")
    lim = cfg.limits
    plan = []
    b = facts.get("backend") or {}
    name = b.get("backend") if isinstance(b, dict) else None
    if name == "cgroup-v2":
        plan.append(f"each job gets {b['root']}/{cfg.cgroup.parent}/job-<id>, each stage a child cgroup; "
                    f"memory limit -> memory.max, CPU limit -> cpu.max; peak from {b['memory_peak_file']}; "
                    f"OOM from memory.events oom_kill; kill via "
                    f"{'cgroup.kill' if b.get('cgroup_kill') else 'repeated SIGKILL'}")
    elif name == "cgroup-v1":
        plan.append(f"each job gets memory,cpu,cpuacct:/{cfg.cgroup.parent}/job-<id>, each stage a child; "
                    f"memory limit -> memory.limit_in_bytes"
                    f"{' (+ memory.memsw.limit_in_bytes)' if b.get('swap_accounting') and cfg.cgroup.limit_swap else ''}"
                    f", CPU limit -> cpu.cfs_quota_us/100000; peak from memory.max_usage_in_bytes; OOM from "
                    f"memory.oom_control oom_kill; kill by repeated SIGKILL of every pid")
    elif name == "psutil":
        plan.append("no writable cgroup: sample the process tree with psutil (approximate)"
                    + ("; enforce the memory limit by killing the tree" if cfg.executor.psutil_enforce_memory
                       else "; memory limit NOT enforced"))
    plan.append(f"limits from job variables {', '.join(cfg.variables.all())}; caps: memory "
                f"{human_bytes(lim.cap_memory_bytes) if lim.cap_memory_bytes else 'host RAM'}, CPU "
                f"{lim.cap_cpu_cores or 'host CPU count'}; default memory limit "
                f"{human_bytes(lim.default_memory_limit_bytes) if lim.default_memory_limit_bytes else 'none'}")
    if cfg.allocation.url:
        plan.append(f"jobs without a memory or CPU limit variable ask {cfg.allocation.url} "
                    f"(timeout {cfg.allocation.timeout} s)")
    sinks = ["job-log marker"] + ([f"spool {cfg.sinks.spool}"] if cfg.sinks.spool else []) + \
        ([f"collector {cfg.sinks.collector_url}"] if cfg.sinks.collector_url else []) + \
        ([f"textfile {cfg.sinks.textfile}"] if cfg.sinks.textfile else [])
    plan.append("usage records go to: " + ", ".join(sinks))
    facts["plan"] = plan
    facts["warnings"] = warnings
    facts["problems"] = problems
    return facts


def run_doctor(cfg: WrapperConfig, environ: Mapping[str, str], as_json: bool = False, out: Any = None) -> int:
    """Print the diagnosis; returns 1 when there is at least one ``PROBLEM``, else 0."""
    out = out or sys.stdout
    d = diagnose(cfg, environ)
    if as_json:
        out.write(json.dumps(d, indent=2, default=str) + "\n")
        return 1 if d["problems"] else 0
    w = out.write
    w(f"kernel:            {d['kernel']}\n")
    w(f"config:            {d['config']}\n")
    w(f"cgroup version:    {d['cgroup_version']}\n")
    w(f"cgroup2 mount:     {d['cgroup2_mount'] or 'none'}"
      + (f" (controllers: {' '.join(d.get('cgroup2_controllers') or []) or 'none'})" if d['cgroup2_mount'] else "")
      + "\n")
    w(f"cgroup v1:         {', '.join(sorted(d['cgroup_v1_hierarchies'])) or 'none'}\n")
    for r in d["selection"]:
        w(f"  - {r}\n")
    b = d["backend"]
    if b:
        w(f"backend:           {b['backend']}\n")
        w(f"controllers:       {' '.join(b.get('controllers', [])) or '-'}\n")
        w(f"memory peak from:  {b.get('memory_peak_file')}\n")
        kill = b.get("cgroup_kill")
        w(f"cgroup.kill:       {'yes' if kill else 'unknown' if kill is None else 'no'}\n")
        probe = b.get("probe") or {}
        if probe.get("probe_cgroup"):
            w(f"  (probed in a child cgroup, {probe['probe_cgroup']}, removed again)\n")
    w(f"signing:           {d['signing']}\n")
    if d.get("record_protection"):
        w(f"record protection: {d['record_protection']}\n")
    w("the wrapper will:\n")
    for p in d["plan"]:
        w(f"  * {p}\n")
    for p in d["warnings"]:
        w(f"WARNING: {p}\n")
    for p in d["problems"]:
        w(f"PROBLEM: {p}\n")
    # Non-zero when anything needs fixing, so `runner-wrapper doctor && ...` and monitoring notice.
    return 1 if d["problems"] else 0
