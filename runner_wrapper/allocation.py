"""Ask the retry bot's allocation endpoint for a job's resources (spack-gantry's contract).

When a job sets no memory or CPU limit variable and ``[allocation] url`` is configured,
``prepare`` sends::

    GET {url}?spec=<spec>&job_name=<name>&project=<path>&ref=<ref>
    Authorization: Bearer <token from $[allocation] token_env>

and expects ``{"variables": {"KUBERNETES_MEMORY_REQUEST": "2000M", ...}}``.
``spec`` is Spack's ``pkg@ver variants arch=ARCH%compiler@ver`` from the job's
``SPACK_JOB_SPEC_*`` variables when present, else the job name.  Any failure
(timeout, refused, bad JSON) gives ``None`` plus a reason; the caller then uses
the defaults, and the job log says which was used.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Mapping

__all__ = ["build_spec", "Allocation", "fetch_allocation", "ALLOWED_VARIABLES"]

#: The only keys taken from an answer (as Spack's dynamic-mapping ``allow`` list).
ALLOWED_VARIABLES = ("KUBERNETES_MEMORY_REQUEST", "KUBERNETES_MEMORY_LIMIT",
                     "KUBERNETES_CPU_REQUEST", "KUBERNETES_CPU_LIMIT")


def build_spec(variables: Mapping[str, str], job_name: str | None) -> str:
    """``pkg@ver variants arch=ARCH%compiler@ver`` from ``SPACK_JOB_SPEC_*``, else the job name."""
    v = {k: (variables.get(f"SPACK_JOB_SPEC_{k}") or "").strip()
         for k in ("PKG_NAME", "PKG_VERSION", "VARIANTS", "ARCH", "COMPILER_NAME", "COMPILER_VERSION")}
    if not v["PKG_NAME"]:
        return job_name or ""
    spec = v["PKG_NAME"]
    if v["PKG_VERSION"]:
        spec += f"@{v['PKG_VERSION']}"
    if v["VARIANTS"]:
        spec += f" {v['VARIANTS']}"
    if v["ARCH"]:
        spec += f" arch={v['ARCH']}"
    if v["COMPILER_NAME"]:
        spec += f"%{v['COMPILER_NAME']}"
        if v["COMPILER_VERSION"]:
            spec += f"@{v['COMPILER_VERSION']}"
    return spec


@dataclass(frozen=True)
class Allocation:
    """An answer: variables (only :data:`ALLOWED_VARIABLES`), or ``None`` and why not."""

    variables: dict[str, str] | None
    reason: str
    spec: str


def fetch_allocation(url: str, spec: str, job_name: str | None, project: str | None, ref: str | None,
                     token: str | None, timeout: float) -> Allocation:
    import urllib.error
    import urllib.parse
    import urllib.request

    query = urllib.parse.urlencode({"spec": spec, "job_name": job_name or "", "project": project or "",
                                    "ref": ref or ""})
    full = url + ("&" if "?" in url else "?") + query
    headers = {"Accept": "application/json", "User-Agent": "runner-wrapper"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        with urllib.request.urlopen(urllib.request.Request(full, headers=headers), timeout=timeout) as resp:
            raw = resp.read(65536)
    except urllib.error.HTTPError as exc:
        return Allocation(None, f"allocation endpoint answered HTTP {exc.code}", spec)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return Allocation(None, f"allocation endpoint unreachable ({reason})", spec)
    try:
        data = json.loads(raw)
    except ValueError:
        return Allocation(None, "allocation endpoint answered with invalid JSON", spec)
    variables = data.get("variables") if isinstance(data, dict) else None
    if not isinstance(variables, dict):
        return Allocation(None, "allocation endpoint answer has no 'variables' object", spec)
    picked = {k: str(variables[k]) for k in ALLOWED_VARIABLES
              if k in variables and isinstance(variables[k], (str, int, float)) and not isinstance(variables[k], bool)}
    if not picked:
        return Allocation(None, "allocation endpoint suggested no resource variables", spec)
    return Allocation(picked, "allocation endpoint", spec)
