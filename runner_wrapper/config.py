"""``wrapper.toml``: the host-side settings of the runner wrapper.

The file is owned by the runner host's admin (never by a job).  Every key is
optional; :func:`load_config` fills the defaults documented in
``config/wrapper.toml`` and turns every mistake into a :class:`ConfigError`
whose message names the key, so ``runner-wrapper doctor`` and the driver can
print it instead of a traceback.

The path comes from ``--config``, else ``$RUNNER_WRAPPER_CONFIG``, else
``/etc/gitlab-rightsizer/wrapper.toml``; a missing default file means "all
defaults" (a missing *explicit* file is an error).
"""

from __future__ import annotations

import os
from typing import Any, Mapping, NamedTuple

# ``wrapper.toml`` is unreadable or keys have wrong values: ``problems`` lists every one (one line
# each; the message joins them), so ``runner-wrapper doctor`` reports them all, not only the first.
from runner_wrapper.problems import ConfigError

__all__ = [
    "ConfigError",
    "WrapperConfig",
    "CgroupSettings",
    "LimitSettings",
    "VariableNames",
    "SigningSettings",
    "SinkSettings",
    "AllocationSettings",
    "ExecutorSettings",
    "RecordSettings",
    "DEFAULT_RECORDED_VARIABLES",
    "DEFAULT_CONFIG_PATH",
    "CONFIG_ENV",
    "load_config",
    "config_from_mapping",
    "config_to_json",
    "config_from_json",
    "CONFIG_JSON_ENV",
]

DEFAULT_CONFIG_PATH = "/etc/gitlab-rightsizer/wrapper.toml"
CONFIG_ENV = "RUNNER_WRAPPER_CONFIG"
#: ``config`` hands the parsed file to later driver calls through ``job_env`` under this name,
#: so ``run`` (once per stage) need not import and run a TOML parser.  Set only by GitLab Runner
#: from the driver's own ``config`` output: a job cannot set it (its variables arrive as ``CUSTOM_ENV_*``).
CONFIG_JSON_ENV = "RUNNER_WRAPPER_CONFIG_JSON"
BACKENDS = ("auto", "v2", "v1", "psutil")


class CgroupSettings(NamedTuple):
    #: ``auto`` (v2, else v1, else psutil), or force ``v2`` / ``v1`` / ``psutil``.
    backend: str = "auto"
    #: Parent cgroup of all job cgroups, relative to each hierarchy root.
    parent: str = "gitlab-rightsizer"
    #: cgroup2 mount; empty = found in /proc/self/mountinfo.
    v2_root: str = ""
    #: Directory holding the v1 hierarchies ``memory/``, ``cpu/``, ``cpuacct/``.
    v1_root: str = "/sys/fs/cgroup"
    #: A job cgroup with no live driver and no activity for this long is reaped.
    stale_after_seconds: float = 3600.0
    #: On v1, also limit ``memory.memsw.limit_in_bytes`` so swap cannot hide an OOM.
    limit_swap: bool = True


class LimitSettings(NamedTuple):
    """Host caps (``None`` = this host's RAM / CPU count) and per-job defaults (``None`` = none)."""

    cap_memory_bytes: int | None = None
    cap_cpu_cores: float | None = None
    default_memory_limit_bytes: int | None = None
    default_memory_request_bytes: int | None = None
    default_cpu_limit_cores: float | None = None
    default_cpu_request_cores: float | None = None


class VariableNames(NamedTuple):
    """Job variable names read for limits: by default the Kubernetes executor's own."""

    memory_limit: str = "KUBERNETES_MEMORY_LIMIT"
    memory_request: str = "KUBERNETES_MEMORY_REQUEST"
    cpu_limit: str = "KUBERNETES_CPU_LIMIT"
    cpu_request: str = "KUBERNETES_CPU_REQUEST"

    def all(self) -> tuple[str, str, str, str]:
        return (self.memory_limit, self.memory_request, self.cpu_limit, self.cpu_request)


class SigningSettings(NamedTuple):
    #: Literal key in the file (keep the file mode 0600); ``key_file`` is preferred.
    key: str = ""
    key_env: str = "RIGHTSIZER_SIGNING_KEY"
    key_id: str = "default"
    #: A root-only file (0600) holding the key on its first line; read by the driver when it signs,
    #: never placed in any environment.  Wins over ``key_env`` and ``key``.
    key_file: str = ""
    #: Run every stage script as this unprivileged user (the driver must run as root), so a build
    #: cannot read the key (docs/usage-record.md, "Threat model").  Empty = the driver's own uid.
    build_user: str = ""
    #: Root-owned (0711) parent of the per-job directories of ``build_user`` (``job-<id>``, its TMPDIR).
    build_dir: str = "/var/lib/gitlab-rightsizer/build"

    def resolve_key(self, environ: Mapping[str, str] | None = None) -> bytes | None:
        """The signing key, or ``None`` when none is configured or ``key_file`` is unreadable
        (records go unsigned; ``runner-wrapper doctor`` says why)."""
        if self.key_file:
            from runner_wrapper.isolation import read_key_file

            try:
                return read_key_file(self.key_file)
            except (OSError, ValueError):
                return None
        env = os.environ if environ is None else environ
        value = env.get(self.key_env, "") if self.key_env else ""
        value = value or self.key
        return value.encode("utf-8") if value else None

    def missing_key_reason(self) -> str:
        """Why :meth:`resolve_key` found no key: the real reason when ``key_file`` is set (it
        cannot be read, or is empty), else ``no signing key configured``."""
        if self.key_file:
            from runner_wrapper.isolation import read_key_file

            try:
                read_key_file(self.key_file)
            except OSError as exc:
                return f"[signing] key_file {self.key_file}: cannot read: {exc.strerror or exc}"
            except ValueError:
                return f"[signing] key_file {self.key_file} is empty"
        return "no signing key configured"


class SinkSettings(NamedTuple):
    #: Append-only JSONL spool; empty = no spool.
    spool: str = "/var/spool/gitlab-rightsizer/usage.jsonl"
    collector_url: str = ""
    collector_token_env: str = "RIGHTSIZER_COLLECTOR_TOKEN"
    collector_timeout: float = 5.0
    collector_attempts: int = 3
    #: node_exporter textfile (``*.prom``); empty = none.
    textfile: str = ""


class AllocationSettings(NamedTuple):
    #: Retry bot's allocation endpoint; empty = never asked.
    url: str = ""
    token_env: str = "RIGHTSIZER_ALLOCATION_TOKEN"
    timeout: float = 2.0


#: Job variables copied into the usage record by default: the Kubernetes executor's resource
#: variables and the Spack CI spec keys (``*`` matches any run of characters).
DEFAULT_RECORDED_VARIABLES: tuple[str, ...] = (
    "KUBERNETES_CPU_REQUEST", "KUBERNETES_CPU_LIMIT", "KUBERNETES_MEMORY_REQUEST", "KUBERNETES_MEMORY_LIMIT",
    "SPACK_JOB_SPEC_*", "SPACK_CI_STACK_NAME", "CI_JOB_SIZE",
)


class RecordSettings(NamedTuple):
    #: Names (``*`` wildcards) of job variables copied into the usage record's ``job.variables``.
    #: Masked variables are never copied, whatever this says.
    variables: tuple[str, ...] = DEFAULT_RECORDED_VARIABLES


class ExecutorSettings(NamedTuple):
    #: Printed in ``config`` output; empty = left out, so the runner's ``[[runners]]`` values apply
    #: (an empty string there is a configuration error on the runner, gitlab-mechanics.md §11.4).
    builds_dir: str = "/builds"
    cache_dir: str = "/cache"
    #: True: one builds directory serves concurrent jobs, so the runner gives each job
    #: ``<builds_dir>/<runner short token>/<concurrent id>/<project path>`` (gitlab-runner
    #: ``common/build.go`` ``ProjectUniqueDir``); false would give every job of a project the same
    #: ``<builds_dir>/<project path>`` even with ``concurrent > 1``.
    builds_dir_is_shared: bool = True
    #: Empty = ``socket.gethostname()``.
    hostname: str = ""
    runner_name: str = ""
    #: Per-job state files (prepare -> run -> cleanup); empty = the job's ``$TMPDIR``.
    state_dir: str = "/var/lib/gitlab-rightsizer/jobs"
    #: Command that runs a generated stage script (the script path is appended).
    shell: tuple[str, ...] = ("bash",)
    #: psutil fallback: kill the process tree when it exceeds the memory limit.
    psutil_enforce_memory: bool = True
    #: Extra variables for later driver calls (``job_env`` in the config JSON).
    job_env: Mapping[str, str] = {}
    #: On SIGTERM (cancel, timeout) the stage's processes get SIGTERM and this long to exit before the
    #: whole cgroup is killed.  Keep it below the runner's ``graceful_kill_timeout``, after which the
    #: runner SIGKILLs the driver (gitlab-runner ``helpers/process/killer.go``).
    kill_grace_seconds: float = 10.0


class WrapperConfig(NamedTuple):
    """The whole file.  Immutable records (``NamedTuple``: cheaper to define than dataclasses,
    which matters because the driver starts once per build stage)."""

    cgroup: CgroupSettings = CgroupSettings()
    limits: LimitSettings = LimitSettings()
    variables: VariableNames = VariableNames()
    sampler_interval: float = 0.5
    signing: SigningSettings = SigningSettings()
    sinks: SinkSettings = SinkSettings()
    allocation: AllocationSettings = AllocationSettings()
    executor: ExecutorSettings = ExecutorSettings()
    record: RecordSettings = RecordSettings()
    #: Where this configuration was read from (``None`` = built-in defaults).
    source: str | None = None


# --------------------------------------------------------------------------- loading


def _d(cls: Any, name: str) -> Any:
    return cls._field_defaults[name]


def load_config(path: str | None = None, environ: Mapping[str, str] | None = None) -> WrapperConfig:
    """Read ``wrapper.toml`` (see module doc for how the path is chosen)."""
    env = os.environ if environ is None else environ
    explicit = path or env.get(CONFIG_ENV) or None
    target = explicit or DEFAULT_CONFIG_PATH
    try:
        with open(target, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        if explicit:
            raise ConfigError(f"{target}: configuration file not found") from None
        return WrapperConfig()
    except OSError as exc:
        raise ConfigError(f"{target}: cannot read: {exc.strerror}") from None
    import tomllib

    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{target}: not valid TOML: {exc}") from None
    return config_from_mapping(data, source=target)


def config_to_json(cfg: WrapperConfig) -> str | None:
    """The parsed configuration as compact JSON, or ``None`` when it holds a literal signing key
    (which must not travel through the environment)."""
    import json

    if cfg.signing.key:
        return None
    d = {name: (sub._asdict() if hasattr(sub, "_asdict") else sub) for name, sub in cfg._asdict().items()}
    return json.dumps(d, separators=(",", ":"), sort_keys=True)


def config_from_json(text: str) -> WrapperConfig:
    """Inverse of :func:`config_to_json`; raises :class:`ConfigError` on anything unexpected."""
    import json

    try:
        d = json.loads(text)
        ex = dict(d["executor"])
        ex["shell"] = tuple(ex["shell"])
        return WrapperConfig(
            cgroup=CgroupSettings(**d["cgroup"]), limits=LimitSettings(**d["limits"]),
            variables=VariableNames(**d["variables"]), sampler_interval=float(d["sampler_interval"]),
            signing=SigningSettings(**d["signing"]), sinks=SinkSettings(**d["sinks"]),
            allocation=AllocationSettings(**d["allocation"]), executor=ExecutorSettings(**ex),
            record=RecordSettings(variables=tuple(d["record"]["variables"])), source=d["source"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"${CONFIG_JSON_ENV} is not a configuration this wrapper wrote: {exc}") from None


def config_from_mapping(data: Mapping[str, Any], source: str | None = None) -> WrapperConfig:
    """Validate a parsed TOML document; unknown tables/keys are errors (typos must not pass).

    Every problem is collected (a bad value is replaced by its default so checking goes on);
    one :class:`ConfigError` at the end lists them all.
    """
    where = source or "wrapper.toml"
    problems: list[str] = []
    r = _Reader(data, where, problems=problems)
    known = {"cgroup", "caps", "defaults", "variables", "sampler", "signing", "sinks", "allocation", "executor",
             "record"}
    for k in data:
        if k not in known:
            problems.append(f"{where}: unknown table [{k}] (known: {', '.join(sorted(known))})")

    cg = r.table("cgroup")
    backend = cg.str("backend", "auto")
    if backend not in BACKENDS:
        problems.append(f"{where}: [cgroup] backend = {backend!r}: expected one of {', '.join(BACKENDS)}")
    parent = cg.str("parent", _d(CgroupSettings, 'parent')).strip("/")
    if not parent or ".." in parent.split("/"):
        problems.append(f"{where}: [cgroup] parent = {parent!r}: expected a relative cgroup path without '..'")
    cgroup = CgroupSettings(
        backend=backend, parent=parent, v2_root=cg.str("v2_root", ""),
        v1_root=cg.str("v1_root", _d(CgroupSettings, 'v1_root')),
        stale_after_seconds=cg.number("stale_after_seconds", _d(CgroupSettings, 'stale_after_seconds'), minimum=0),
        limit_swap=cg.bool("limit_swap", True),
    )
    cg.done()

    caps, defaults = r.table("caps"), r.table("defaults")
    limits = LimitSettings(
        cap_memory_bytes=caps.memory("memory"),
        cap_cpu_cores=caps.cpu("cpu"),
        default_memory_limit_bytes=defaults.memory("memory_limit"),
        default_memory_request_bytes=defaults.memory("memory_request"),
        default_cpu_limit_cores=defaults.cpu("cpu_limit"),
        default_cpu_request_cores=defaults.cpu("cpu_request"),
    )
    caps.done()
    defaults.done()

    var = r.table("variables")
    variables = VariableNames(**{k: var.str(k, _d(VariableNames, k)) for k in
                                 ("memory_limit", "memory_request", "cpu_limit", "cpu_request")})
    var.done()

    sam = r.table("sampler")
    interval = sam.number("interval", 0.5, minimum=0.01)
    sam.done()

    sig = r.table("signing")
    signing = SigningSettings(key=sig.str("key", ""), key_env=sig.str("key_env", _d(SigningSettings, 'key_env')),
                              key_id=sig.str("key_id", "default") or "default", key_file=sig.str("key_file", ""),
                              build_user=sig.str("build_user", ""),
                              build_dir=sig.str("build_dir", _d(SigningSettings, 'build_dir')))
    if signing.build_dir and not signing.build_dir.startswith("/"):
        problems.append(f"{where}: [signing] build_dir = {signing.build_dir!r}: must be an absolute path")
    if signing.key_file and not signing.key_file.startswith("/"):
        problems.append(f"{where}: [signing] key_file = {signing.key_file!r}: must be an absolute path")
    sig.done()

    sk = r.table("sinks")
    sinks = SinkSettings(
        spool=sk.str("spool", _d(SinkSettings, 'spool')), collector_url=sk.str("collector_url", ""),
        collector_token_env=sk.str("collector_token_env", _d(SinkSettings, 'collector_token_env')),
        collector_timeout=sk.number("collector_timeout", 5.0, minimum=0.1),
        collector_attempts=int(sk.number("collector_attempts", 3, minimum=1)),
        textfile=sk.str("textfile", ""),
    )
    sk.done()
    if sinks.collector_url and not sinks.collector_url.startswith(("http://", "https://")):
        problems.append(f"{where}: [sinks] collector_url must start with http:// or https://")

    al = r.table("allocation")
    allocation = AllocationSettings(url=al.str("url", ""), token_env=al.str("token_env", _d(AllocationSettings, 'token_env')),
                                    timeout=al.number("timeout", 2.0, minimum=0.05))
    al.done()
    if allocation.url and not allocation.url.startswith(("http://", "https://")):
        problems.append(f"{where}: [allocation] url must start with http:// or https://")

    ex = r.table("executor")
    shell = ex.get("shell", ["bash"])
    if isinstance(shell, str):
        shell = [shell]
    if not isinstance(shell, list) or not shell or not all(isinstance(s, str) and s for s in shell):
        problems.append(f"{where}: [executor] shell: expected a command as a list of strings, e.g. [\"bash\"]")
        shell = ["bash"]
    job_env = ex.get("job_env", {})
    if not isinstance(job_env, dict) or not all(isinstance(v, str) for v in job_env.values()):
        problems.append(f"{where}: [executor] job_env: expected a table of strings")
        job_env = {}
    executor = ExecutorSettings(
        builds_dir=ex.str("builds_dir", _d(ExecutorSettings, 'builds_dir')),
        cache_dir=ex.str("cache_dir", _d(ExecutorSettings, 'cache_dir')),
        builds_dir_is_shared=ex.bool("builds_dir_is_shared", _d(ExecutorSettings, 'builds_dir_is_shared')),
        hostname=ex.str("hostname", ""), runner_name=ex.str("runner_name", ""),
        state_dir=ex.str("state_dir", _d(ExecutorSettings, 'state_dir')), shell=tuple(shell),
        psutil_enforce_memory=ex.bool("psutil_enforce_memory", True), job_env=dict(job_env),
        kill_grace_seconds=ex.number("kill_grace_seconds", _d(ExecutorSettings, 'kill_grace_seconds'), minimum=0),
    )
    ex.done()

    rec = r.table("record")
    names = rec.get("variables", list(DEFAULT_RECORDED_VARIABLES))
    if not isinstance(names, list) or not all(isinstance(n, str) and n.strip() for n in names):
        problems.append(f"{where}: [record] variables: expected a list of variable names (\"*\" wildcards "
                        f"allowed), e.g. [\"KUBERNETES_MEMORY_LIMIT\", \"SPACK_JOB_SPEC_*\"]")
        names = list(DEFAULT_RECORDED_VARIABLES)
    record = RecordSettings(variables=tuple(n.strip() for n in names))
    rec.done()
    if problems:
        raise ConfigError(problems)
    return WrapperConfig(cgroup=cgroup, limits=limits, variables=variables, sampler_interval=interval,
                         signing=signing, sinks=sinks, allocation=allocation, executor=executor, record=record,
                         source=source)


class _Reader:
    """Typed access to one TOML table that remembers which keys were consumed."""

    def __init__(self, data: Mapping[str, Any], where: str, name: str = "",
                 problems: list[str] | None = None) -> None:
        self.data, self.where, self.name, self.used = data, where, name, set()
        #: Problems found so far (shared by every table's reader); a bad value reads as its default.
        self.problems: list[str] = [] if problems is None else problems

    def _bad(self, message: str, default: Any) -> Any:
        self.problems.append(message)
        return default

    def table(self, name: str) -> "_Reader":
        sub = self.data.get(name, {})
        if not isinstance(sub, Mapping):
            self.problems.append(f"{self.where}: [{name}] must be a table")
            sub = {}
        return _Reader(sub, self.where, name, self.problems)

    def _label(self, key: str) -> str:
        return f"{self.where}: [{self.name}] {key}"

    def get(self, key: str, default: Any) -> Any:
        self.used.add(key)
        return self.data.get(key, default)

    def str(self, key: str, default: str) -> str:
        v = self.get(key, default)
        if not isinstance(v, str):
            return self._bad(f"{self._label(key)} = {v!r}: expected a string", default)
        return v

    def bool(self, key: str, default: bool) -> bool:
        v = self.get(key, default)
        if not isinstance(v, bool):
            return self._bad(f"{self._label(key)} = {v!r}: expected true or false", default)
        return v

    def number(self, key: str, default: float, minimum: float | None = None) -> float:
        v = self.get(key, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v:
            return self._bad(f"{self._label(key)} = {v!r}: expected a number", float(default))
        if minimum is not None and v < minimum:
            return self._bad(f"{self._label(key)} = {v!r}: must be at least {minimum}", float(default))
        return float(v)

    def memory(self, key: str) -> int | None:
        v = self.get(key, "")
        if v in ("", None):
            return None
        from runner_wrapper.quantity import QuantityError, parse_memory

        try:
            return parse_memory(v)
        except QuantityError as exc:
            return self._bad(f"{self._label(key)}: {exc}", None)

    def cpu(self, key: str) -> float | None:
        v = self.get(key, "")
        if v in ("", None):
            return None
        from runner_wrapper.quantity import QuantityError, parse_cpu

        try:
            return parse_cpu(v)
        except QuantityError as exc:
            return self._bad(f"{self._label(key)}: {exc}", None)

    def done(self) -> None:
        extra = sorted(set(self.data) - self.used)
        if extra:
            self.problems.append(f"{self.where}: [{self.name}] unknown key(s): {', '.join(extra)}")
