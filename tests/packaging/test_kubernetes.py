"""Kubernetes manifests: they parse, kustomize renders them, and every command,
port, path, label and secret key they mention agrees with the code, the
Containerfile and the ConfigMap's own bot.toml (loaded with the bot's loader)."""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from ._paths import CONFIG, PACKAGING

K8S = PACKAGING / "kubernetes"
CONTAINERFILE = PACKAGING / "container" / "Containerfile"


@functools.lru_cache(maxsize=1)
def _docs() -> list[dict[str, Any]]:
    """Every object of every manifest (parsed once; treat as read-only)."""
    out = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if doc is not None:
                doc["__file__"] = path.name
                out.append(doc)
    return out


def _one(kind: str, component: str | None = None) -> dict[str, Any]:
    found = [d for d in _docs() if d["kind"] == kind and (
        component is None or d["metadata"].get("labels", {}).get("app.kubernetes.io/component") == component)]
    assert len(found) == 1, f"expected one {kind} {component or ''}, found {len(found)}"
    return found[0]


def _deployment(component: str = "bot") -> dict[str, Any]:
    return _one("Deployment", component)


def _container(component: str = "bot") -> dict[str, Any]:
    (c,) = _deployment(component)["spec"]["template"]["spec"]["containers"]
    return c


COMPONENTS = ("bot", "serve")


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def test_every_manifest_parses_and_is_listed_in_the_kustomization() -> None:
    docs = _docs()
    assert docs
    for d in docs:
        assert {"apiVersion", "kind", "metadata"} <= set(d), d["__file__"]
        assert d["metadata"].get("name"), d["__file__"]
    kust = yaml.safe_load((K8S / "kustomization.yaml").read_text(encoding="utf-8"))
    files = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kust["resources"]) == files
    kinds = {d["kind"] for d in docs}
    assert {"Deployment", "Secret", "ConfigMap", "Service", "ServiceMonitor", "PodDisruptionBudget",
            "PrometheusRule"} <= kinds
    names = [(d["kind"], d["metadata"]["name"]) for d in docs]
    assert len(names) == len(set(names)), "duplicate object names"


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed (kustomize is built into it)")
def test_kustomize_renders_the_manifests() -> None:
    proc = subprocess.run(["kubectl", "kustomize", str(K8S)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rendered = [d for d in yaml.safe_load_all(proc.stdout) if d]
    assert len(rendered) == len(_docs())
    for d in rendered:
        if d["kind"] != "Namespace":
            assert d["metadata"]["namespace"] == "gitlab-rightsizer", d["metadata"]["name"]


def test_deployment_runs_the_real_command_with_the_mounted_config() -> None:
    from retry_bot.cli import build_parser

    c = _container()
    assert "command" not in c, "the image's ENTRYPOINT (retry-bot) runs; the manifest gives args only"
    entry = re.search(r"^ENTRYPOINT\s+(\[.*\])$", CONTAINERFILE.read_text(encoding="utf-8"), re.M)
    assert entry and yaml.safe_load(entry.group(1)) == ["retry-bot"]
    args = build_parser().parse_args(c["args"])
    assert args.command == "run" and callable(args.func)
    config_path = Path(args.config)
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    assert str(config_path.parent) in mounts, f"{config_path} is not on a mounted volume"
    volumes = {v["name"]: v for v in _deployment()["spec"]["template"]["spec"]["volumes"]}
    cm_name = volumes[mounts[str(config_path.parent)]]["configMap"]["name"]
    cm = _one("ConfigMap")
    assert cm["metadata"]["name"] == cm_name
    assert config_path.name in cm["data"]


def _configmap_dir(tmp_path: Path) -> Path:
    d = tmp_path / "etc-retry-bot"
    d.mkdir()
    for name, text in _one("ConfigMap")["data"].items():
        (d / name).write_text(text, encoding="utf-8")
    return d


def _pod_env(component: str = "bot") -> dict[str, str]:
    """The container's environment as the kubelet would build it from the Secret."""
    secret = _one("Secret")
    data = secret.get("stringData") or {}
    env = {}
    for e in _container(component).get("env", []):
        if "value" in e:
            env[e["name"]] = e["value"]
        else:
            ref = e["valueFrom"]["secretKeyRef"]
            assert ref["name"] == secret["metadata"]["name"], e
            assert ref["key"] in data, f"Secret has no key {ref['key']!r}"
            env[e["name"]] = data[ref["key"]]
    return env


def test_configmap_bot_toml_loads_with_the_pod_environment(tmp_path: Path) -> None:
    from retry_bot.live.config import load_config
    from retry_bot.policy import load_policy

    d = _configmap_dir(tmp_path)
    cfg = load_config(d / "bot.toml", env=_pod_env())
    assert cfg.gitlab.token, "token_env of bot.toml is not set by the Deployment"
    assert set(cfg.signing_keys) == {"default"}
    assert cfg.policy_path == str(d / "policy.toml")
    load_policy(cfg.policy_path)
    # Two replicas need the PostgreSQL store (leader lease); libpq takes the password from PGPASSWORD.
    replicas = _deployment()["spec"]["replicas"]
    if replicas > 1:
        assert cfg.state_url.startswith("postgresql://") and cfg.leader_enabled
        assert "PGPASSWORD" in _pod_env() and ":" not in cfg.state_url.split("//", 1)[1].split("@", 1)[0]
    # Probes and Prometheus reach the HTTP server from outside the pod.
    host, _, port = cfg.listen.rpartition(":")
    assert host in ("0.0.0.0", "::", "[::]"), cfg.listen
    ports = {p["name"]: p["containerPort"] for p in _container()["ports"]}
    assert int(port) in ports.values()


def test_configmap_policy_is_config_policy() -> None:
    policy = _one("ConfigMap")["data"]["policy.toml"]
    assert policy == (CONFIG / "policy.toml").read_text(encoding="utf-8"), (
        "packaging/kubernetes/configmap.yaml's policy.toml differs from config/policy.toml: "
        "run python packaging/kubernetes/sync-configmap.py")


@pytest.mark.parametrize("component", COMPONENTS)
def test_probes_service_and_servicemonitor_agree(component: str) -> None:
    c = _container(component)
    dep = _deployment(component)
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    for probe in ("livenessProbe", "readinessProbe"):
        get = c[probe]["httpGet"]
        assert get["path"] == "/healthz"
        assert get["port"] in ports or get["port"] in ports.values()
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    assert _matches(dep["spec"]["selector"]["matchLabels"], pod_labels)
    svc = _one("Service", component)
    assert _matches(svc["spec"]["selector"], pod_labels)
    # The selector picks this component's pods only.
    other = _deployment(next(x for x in COMPONENTS if x != component))
    assert not _matches(svc["spec"]["selector"], other["spec"]["template"]["metadata"]["labels"])
    svc_ports = {p["name"]: p for p in svc["spec"]["ports"]}
    for p in svc_ports.values():
        assert p["targetPort"] in ports or p["targetPort"] in ports.values()
    sm = _one("ServiceMonitor")
    assert _matches(sm["spec"]["selector"]["matchLabels"], svc["metadata"]["labels"])
    assert {ep["port"] for ep in sm["spec"]["endpoints"]} & set(svc_ports), "no endpoint scrapes this Service"
    for ep in sm["spec"]["endpoints"]:
        assert ep["path"] == "/metrics"
    pdb = _one("PodDisruptionBudget", component)
    assert _matches(pdb["spec"]["selector"]["matchLabels"], pod_labels)
    assert pdb["spec"]["minAvailable"] < dep["spec"]["replicas"]


def test_serve_runs_the_real_command_on_the_bot_database(tmp_path: Path) -> None:
    from retry_bot.cli import build_parser
    from retry_bot.live.config import load_config

    c = _container("serve")
    args = build_parser().parse_args(c["args"])
    assert args.command == "serve" and callable(args.func)
    cfg = load_config(_configmap_dir(tmp_path) / "bot.toml", env=_pod_env())
    assert args.state == cfg.state_url, "serve must read the bot's state database"
    mounts = {m["mountPath"] for m in c["volumeMounts"]}
    assert str(Path(args.policy).parent) in mounts and Path(args.policy).name in _one("ConfigMap")["data"]
    env = _pod_env("serve")
    assert env.get(args.token_env), f"{args.token_env} (the collector token) is not set from the Secret"
    for spec in args.key or ["default=RIGHTSIZER_SIGNING_KEY"]:
        kid, _, var = spec.partition("=")
        assert kid in cfg.signing_keys and env.get(var), spec
    host, _, port = args.listen.rpartition(":")
    assert host == "0.0.0.0" and int(port) in {p["containerPort"] for p in c["ports"]}


@pytest.mark.parametrize("component", COMPONENTS)
def test_pod_runs_as_the_image_user_without_privileges(component: str, tmp_path: Path) -> None:
    spec = _deployment(component)["spec"]["template"]["spec"]
    uid = int(re.search(r"^USER\s+(\d+)", CONTAINERFILE.read_text(encoding="utf-8"), re.M).group(1))
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] == uid != 0
    sc = _container(component)["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert spec["automountServiceAccountToken"] is False
    # SIGTERM lets the GitLab call in flight finish: at most [gitlab] max_total_seconds.
    from retry_bot.live.config import load_config

    if component == "bot":
        cfg = load_config(_configmap_dir(tmp_path) / "bot.toml", env=_pod_env())
        assert spec["terminationGracePeriodSeconds"] > cfg.gitlab.max_total_seconds


def test_alert_rules_use_real_metrics_and_labels() -> None:
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics import MetricWrapperBase

    from retry_bot.live.metrics import BotMetrics
    from retry_bot.server import make_metrics

    from .test_grafana import TARGET_LABELS, grouping_labels, matcher_labels, metric_names

    labels: dict[str, set[str]] = {}
    for owner in (BotMetrics(), make_metrics(CollectorRegistry())):
        for v in vars(owner).values():
            if isinstance(v, MetricWrapperBase):
                kind = v._type  # noqa: SLF001
                for suffix in {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"]}.get(kind, [""]):
                    labels[v._name + suffix] = set(v._labelnames)  # noqa: SLF001
    rules = [r for g in _one("PrometheusRule")["spec"]["groups"] for r in g["rules"]]
    assert rules
    for rule in rules:
        names = metric_names(rule["expr"])
        assert names and names <= set(labels), f"{rule['alert']}: unknown metric in {sorted(names)}"
        known = set().union(*(labels[n] for n in names)) | TARGET_LABELS
        assert (grouping_labels(rule["expr"]) | matcher_labels(rule["expr"])) <= known, rule["alert"]
        assert rule["annotations"]["summary"]
