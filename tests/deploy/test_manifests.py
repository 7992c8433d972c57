"""deploy/: the compose file, the images and the Kubernetes manifests, checked without Docker.

Each check is a property production depends on: pinned versions equal to the
server CI runs, one GPU per GPU worker, grace periods longer than the worker's
graceful shutdown, every setting a name Settings reads, secrets only from the
environment and only where needed, files referenced by the manifests present.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

import worker
from kernelopt.config import Settings
from tests.deploy.yaml_subset import YamlSubsetError, load, loads_all
from tests.support.paths import ROOT

DEPLOY = ROOT / "deploy"
COMPOSE_FILE = DEPLOY / "compose.yaml"
K8S = DEPLOY / "k8s"
GRACE = worker.GRACEFUL_SHUTDOWN.total_seconds()
# After the graceful window, cancelled GPU activities kill their child process
# group and wait up to 10 s for it (activities/supervise.py); keep 20 s spare.
GPU_MARGIN = 10 + 20
CPU_MARGIN = 20
SECRET_NAMES = re.compile(r"(API_KEY|PASSWORD|PWD|SECRET|TOKEN)$")


# --- helpers ---------------------------------------------------------------------------------
def compose() -> dict[str, Any]:
    return load(COMPOSE_FILE)


def services() -> dict[str, dict[str, Any]]:
    return compose()["services"]


def kernelopt_services() -> dict[str, dict[str, Any]]:
    return {n: s for n, s in services().items() if s.get("image", "").startswith("kernelopt-")}


def gpu_workers() -> dict[str, dict[str, Any]]:
    return {n: s for n, s in services().items() if n.startswith("worker-gpu")}


def seconds(duration: str | int) -> float:
    if isinstance(duration, int):
        return float(duration)
    match = re.fullmatch(r"(?:(\d+)m)?(?:(\d+)s)?", duration)
    if not match or not duration:
        raise ValueError(f"unsupported duration {duration!r}")
    return 60.0 * int(match.group(1) or 0) + int(match.group(2) or 0)


def env_file(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            out[key.strip()] = value
    return out


def service_env(name: str) -> dict[str, str]:
    svc = services()[name]
    env: dict[str, str] = {}
    if "env_file" in svc:
        env.update(env_file(COMPOSE_FILE.parent / svc["env_file"]))
    env.update({k: "" if v is None else str(v) for k, v in (svc.get("environment") or {}).items()})
    return env


def settings_from(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    import os

    for key in list(os.environ):
        if key.startswith("KERNELOPT_") or key == "OPENAI_BASE_URL":
            monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return Settings.from_env()


def assert_settings_names(names: list[str], where: str) -> None:
    for name in names:
        if name.startswith("KERNELOPT_"):
            field = name.removeprefix("KERNELOPT_").lower()
            assert field in Settings.model_fields, f"{where}: {name} is not a kernelopt setting"


def dev_server_versions() -> tuple[str, str]:
    from kernelopt.temporal_server import temporal_binary

    out = subprocess.run(
        [str(temporal_binary()), "--version"], capture_output=True, text=True, check=True
    ).stdout
    match = re.search(r"Server ([0-9.]+), UI ([0-9.]+)", out)
    assert match, out
    return match.group(1), match.group(2)


def k8s_docs() -> dict[str, dict[str, Any]]:
    kustomization = load(K8S / "kustomization.yaml")
    docs: dict[str, dict[str, Any]] = {}
    for resource in kustomization["resources"]:
        for doc in loads_all((K8S / resource).read_text()):
            docs[f"{doc['kind']}/{doc['metadata']['name']}"] = doc
    return docs


def pod_spec(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"]["template"]["spec"]


def container(doc: dict[str, Any]) -> dict[str, Any]:
    (only,) = pod_spec(doc)["containers"]
    return only


def dockerfile_targets() -> dict[str, str]:
    """target name -> that stage's text."""
    text = (DEPLOY / "Dockerfile").read_text()
    stages = re.split(r"^FROM ", text, flags=re.MULTILINE)[1:]
    out = {}
    for stage in stages:
        match = re.match(r"\S+ AS (\w+)", stage)
        if match:
            out[match.group(1)] = stage
    return out


# --- the YAML reader itself --------------------------------------------------------------------
def test_yaml_subset_reads_what_it_claims() -> None:
    text = (
        "a: 1\n"
        "b: 'x # not a comment'  # a comment\n"
        "c:\n"
        "  - name: n\n"
        '    value: "v: w"\n'
        "  - plain:with:colons\n"
        'd: [x, "y z", 3]\n'
        "e: {}\n"
        "f:\n"
        "- 1.5\n"
        "---\n"
        "g: null\n"
    )
    assert loads_all(text) == [
        {
            "a": 1,
            "b": "x # not a comment",
            "c": [{"name": "n", "value": "v: w"}, "plain:with:colons"],
            "d": ["x", "y z", 3],
            "e": {},
            "f": [1.5],
        },
        {"g": None},
    ]


@pytest.mark.parametrize(
    "bad",
    ["a: &anchor 1\n", "a: |\n  text\n", "a:\n\tb: 1\n", "a: 1\n  b: 2\n", "a: 1\na: 2\n"],
)
def test_yaml_subset_refuses_what_it_does_not_read(bad: str) -> None:
    with pytest.raises(YamlSubsetError):
        loads_all(bad)


def test_yaml_subset_agrees_with_pyyaml_where_installed() -> None:
    yaml = pytest.importorskip("yaml")
    files = [COMPOSE_FILE, DEPLOY / "compose" / "dynamicconfig" / "kernelopt.yaml"]
    files += sorted(K8S.glob("*.yaml"))
    for path in files:
        ours = loads_all(path.read_text())
        theirs = [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]
        assert ours == theirs, path


# --- compose ---------------------------------------------------------------------------------
def test_temporal_images_are_pinned_to_the_dev_server_versions() -> None:
    server, ui = dev_server_versions()
    images = {n: s["image"] for n, s in services().items() if "image" in s}
    temporal = {n: i for n, i in images.items() if i.startswith("temporalio/")}
    assert temporal["temporal"] == f"temporalio/server:{server}"
    assert temporal["temporal-schema"] == f"temporalio/admin-tools:{server}"
    assert temporal["temporal-ui"] == f"temporalio/ui:{ui}"
    for name, image in images.items():
        tag = image.rpartition(":")[2]
        assert ":" in image and tag not in ("", "latest"), f"{name}: unpinned image {image}"
    # the README states the same pins
    readme = (DEPLOY / "README.md").read_text()
    for image in temporal.values():
        assert image.split("/")[1] in readme.replace("`", "")


def test_compose_has_every_part_and_a_sound_start_order() -> None:
    svc = services()
    for name in ("postgresql", "temporal-schema", "temporal", "temporal-ui", "temporal-setup"):
        assert name in svc
    assert "worker-cpu" in svc and gpu_workers()
    # every dependency exists, and the graph has no cycle
    graph = {n: set((s.get("depends_on") or {}).keys()) for n, s in svc.items()}
    for name, deps in graph.items():
        assert deps <= set(svc), f"{name} depends on unknown {deps - set(svc)}"
    seen: set[str] = set()

    def visit(node: str, path: tuple[str, ...]) -> None:
        assert node not in path, f"dependency cycle {(*path, node)}"
        if node in seen:
            return
        for dep in graph[node]:
            visit(dep, (*path, node))
        seen.add(node)

    for name in graph:
        visit(name, ())
    conditions = {
        ("temporal-schema", "postgresql"): "service_healthy",
        ("temporal", "temporal-schema"): "service_completed_successfully",
        ("temporal-setup", "temporal"): "service_healthy",
        ("worker-cpu", "temporal-setup"): "service_completed_successfully",
    }
    for name in gpu_workers():
        conditions[(name, "temporal-setup")] = "service_completed_successfully"
    for (name, dep), condition in conditions.items():
        assert svc[name]["depends_on"][dep]["condition"] == condition, (name, dep)
    for name in ("postgresql", "temporal"):
        assert svc[name]["healthcheck"]["test"], f"{name} needs a healthcheck for depends_on"


def test_temporal_server_runs_on_postgresql_with_our_files() -> None:
    svc = services()
    env = svc["temporal"]["environment"]
    assert env["DB"] == "postgres12"
    assert env["POSTGRES_SEEDS"] in svc
    assert env["BIND_ON_IP"] == "0.0.0.0"
    assert int(env["NUM_HISTORY_SHARDS"]) >= 4
    mounts = dict(v.rsplit(":", 1)[0].split(":", 1) for v in svc["temporal"]["volumes"])
    (host, inside), *_ = mounts.items()
    config = Path(env["DYNAMIC_CONFIG_FILE_PATH"])
    assert config.parent == Path(inside)
    config_file = (COMPOSE_FILE.parent / host / config.name).resolve()
    assert config_file.is_file()
    assert isinstance(load(config_file), dict)
    # the schema job runs our script, with the password from the environment
    schema = svc["temporal-schema"]
    host_script, inside_script = schema["volumes"][0].split(":")[:2]
    assert schema["entrypoint"][-1] == inside_script
    assert (COMPOSE_FILE.parent / host_script).is_file()
    assert schema["environment"]["SQL_PASSWORD"].startswith("${TEMPORAL_DB_PASSWORD")
    for name, svc_ in svc.items():
        for port in svc_.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"


def test_schema_script_is_valid_posix_sh() -> None:
    script = DEPLOY / "compose" / "postgres-schema.sh"
    done = subprocess.run(["sh", "-n", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    text = script.read_text()
    assert text.startswith("#!/bin/sh") and "set -eu" in text
    assert "[[" not in text and "function " not in text  # admin-tools' sh is busybox


def test_one_gpu_per_gpu_worker_and_distinct_gpus() -> None:
    device_ids: list[str] = []
    for name, svc in gpu_workers().items():
        devices = svc["deploy"]["resources"]["reservations"]["devices"]
        assert len(devices) == 1, name
        (device,) = devices
        assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]
        assert len(device["device_ids"]) == 1, f"{name} must reserve exactly one GPU"
        device_ids += device["device_ids"]
        assert svc["command"] == ["worker", "--queue", "gpu", "--gpu", "0"], name
    assert len(device_ids) == len(set(device_ids)), f"two GPU workers share a GPU: {device_ids}"
    assert services()["worker-cpu"]["command"] == ["worker", "--queue", "cpu"]
    for name in ("worker-cpu", "temporal-setup", "kernelopt"):
        assert "deploy" not in services()[name], f"{name} must not reserve a GPU"


def test_compose_grace_periods_outlast_the_graceful_shutdown() -> None:
    cpu = services()["worker-cpu"]
    assert cpu["stop_signal"] == "SIGTERM"
    assert seconds(cpu["stop_grace_period"]) >= GRACE + CPU_MARGIN
    for name, svc in gpu_workers().items():
        assert svc["stop_signal"] == "SIGTERM"
        assert seconds(svc["stop_grace_period"]) >= GRACE + GPU_MARGIN, name


def test_compose_settings_are_kernelopt_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in kernelopt_services():
        env = service_env(name)
        assert_settings_names(list(env), f"compose service {name}")
        settings = settings_from(env, monkeypatch)
        host, _, port = settings.address.rpartition(":")
        assert host in services() and port == "7233", f"{name} does not reach the server"
        assert settings.namespace == "kernelopt"
        # the shared store: the volume every kernelopt container mounts at KERNELOPT_HOME
        if name != "temporal-setup":
            mounts = services()[name]["volumes"]
            assert f"kernelopt-home:{settings.home}" in mounts, name
    assert "kernelopt-home" in compose()["volumes"]


def test_compose_secrets_come_from_the_shell_and_only_where_needed() -> None:
    for name, svc in services().items():
        for key, value in (svc.get("environment") or {}).items():
            if SECRET_NAMES.search(key):
                assert str(value).startswith("${"), f"{name}: literal secret in {key}"
    env_text = (DEPLOY / "compose" / "kernelopt.env").read_text()
    for key in env_file(DEPLOY / "compose" / "kernelopt.env"):
        assert not SECRET_NAMES.search(key), f"secret {key} in the shared env file"
    assert "API_KEY=" not in env_text.replace("LLM_API_KEY_ENV=", "")
    # the LLM key reaches the CPU worker and no GPU worker (they run candidate code)
    assert "OPENAI_API_KEY" in services()["worker-cpu"]["environment"]
    for name in gpu_workers():
        assert "OPENAI_API_KEY" not in service_env(name), name


def test_compose_builds_the_images_the_dockerfile_defines() -> None:
    targets = dockerfile_targets()
    assert {"cpu", "gpu"} <= set(targets)
    for name, svc in kernelopt_services().items():
        build = svc["build"]
        assert (COMPOSE_FILE.parent / build["context"] / build["dockerfile"]).resolve() == (
            DEPLOY / "Dockerfile"
        )
        assert svc["image"] == f"kernelopt-worker:{build['target']}", name
        assert build["target"] in targets
    setup = services()["temporal-setup"]["entrypoint"]
    assert setup[:2] == ["tini", "--"] and setup[-1] == "/opt/kernelopt/deploy/setup_temporal.py"


# --- images ----------------------------------------------------------------------------------
def test_images_run_the_worker_under_an_init_as_non_root() -> None:
    targets = dockerfile_targets()
    # both images install the one stage of code; the set-up script is where compose and
    # the Job run it
    source = targets["source"]
    assert "COPY deploy/setup_temporal.py deploy/install_worker.sh /opt/kernelopt/deploy/" in source
    for name in ("cpu", "gpu"):
        stage = targets[name]
        assert 'ENTRYPOINT ["tini", "--", "kernelopt"]' in stage, name
        assert "USER 10001:10001" in stage, name
        assert "KERNELOPT_HOME=/var/lib/kernelopt" in stage, name
        assert "WORKDIR /opt/kernelopt" in stage
        assert "COPY --from=source /opt/kernelopt ./" in stage, name
    for stage in targets.values():
        for copied in re.findall(r"^COPY (?!--from=)(.+) \S+$", stage, flags=re.MULTILINE):
            for path in copied.split():
                assert (ROOT / path).exists(), f"Dockerfile copies missing {path}"
    assert 'CMD ["worker", "--queue", "gpu", "--gpu", "0"]' in targets["gpu"]
    assert "nvidia/cuda" in (DEPLOY / "Dockerfile").read_text()
    ignore = (ROOT / ".dockerignore").read_text().split()
    assert ".git" in ignore and ".whl" in ignore


# --- Kubernetes ------------------------------------------------------------------------------
def test_kustomization_lists_parseable_objects() -> None:
    docs = k8s_docs()
    kinds = {key.split("/")[0] for key in docs}
    assert {"Namespace", "ConfigMap", "PersistentVolumeClaim", "Job", "Deployment"} <= kinds
    for key, doc in docs.items():
        assert doc["apiVersion"] and doc["metadata"]["name"], key
    listed = set(load(K8S / "kustomization.yaml")["resources"])
    on_disk = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == on_disk, "every manifest is applied, nothing listed is missing"


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
def test_kubectl_renders_the_kustomization() -> None:
    done = subprocess.run(
        ["kubectl", "kustomize", str(K8S)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("kind: Deployment") == 2


def test_k8s_settings_are_kernelopt_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    config = k8s_docs()["ConfigMap/kernelopt-settings"]["data"]
    assert_settings_names(list(config), "k8s ConfigMap")
    for key in config:
        assert not SECRET_NAMES.search(key), f"secret {key} in a ConfigMap"
    settings = settings_from(config, monkeypatch)
    assert not settings.embedded and settings.address.endswith(":7233")
    assert str(settings.home) == "/var/lib/kernelopt"


def _env(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container(doc).get("env", [])}


def _mounts(doc: dict[str, Any]) -> dict[str, str]:
    return {m["name"]: m["mountPath"] for m in container(doc).get("volumeMounts", [])}


def test_k8s_workers_share_the_store_and_read_the_settings() -> None:
    docs = k8s_docs()
    pvc = docs["PersistentVolumeClaim/kernelopt-home"]
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    home = docs["ConfigMap/kernelopt-settings"]["data"]["KERNELOPT_HOME"]
    images = {i["name"] for i in load(K8S / "kustomization.yaml")["images"]}
    for key, doc in docs.items():
        if doc["kind"] not in ("Deployment", "Job"):
            continue
        c = container(doc)
        assert c["image"].split(":")[0] in images, key
        assert {"configMapRef": {"name": "kernelopt-settings"}} in c["envFrom"], key
        security = pod_spec(doc)["securityContext"]
        assert security["runAsNonRoot"] is True and security["runAsUser"] == 10001, key
        if doc["kind"] == "Deployment":
            volumes = {v["name"]: v for v in pod_spec(doc)["volumes"]}
            assert _mounts(doc)["home"] == home, key
            assert volumes["home"]["persistentVolumeClaim"]["claimName"] == "kernelopt-home"


def test_k8s_secrets_come_from_secrets_and_only_where_needed() -> None:
    docs = k8s_docs()
    for key, doc in docs.items():
        if doc["kind"] not in ("Deployment", "Job"):
            continue
        for name, entry in _env(doc).items():
            if SECRET_NAMES.search(name):
                assert "value" not in entry, f"{key}: literal secret {name}"
                assert entry["valueFrom"]["secretKeyRef"]["name"] == "kernelopt-secrets"
    assert "OPENAI_API_KEY" in _env(docs["Deployment/kernelopt-worker-cpu"])
    assert "OPENAI_API_KEY" not in _env(docs["Deployment/kernelopt-worker-gpu-h200"])


def test_k8s_gpu_pool_runs_one_worker_per_gpu() -> None:
    gpu = k8s_docs()["Deployment/kernelopt-worker-gpu-h200"]
    c = container(gpu)
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert "nvidia.com/gpu" not in c["resources"].get("requests", {}) or (
        c["resources"]["requests"]["nvidia.com/gpu"] == 1
    )
    assert c["args"] == ["worker", "--queue", "gpu", "--gpu", "0"]
    assert gpu["spec"]["strategy"]["rollingUpdate"]["maxSurge"] == 0
    spec = pod_spec(gpu)
    assert any(t["key"] == "nvidia.com/gpu" for t in spec["tolerations"])
    assert spec["nodeSelector"], "GPU workers are pinned to the GPU pool"
    assert _mounts(gpu)["shm"] == "/dev/shm"
    cpu = k8s_docs()["Deployment/kernelopt-worker-cpu"]
    assert container(cpu)["args"] == ["worker", "--queue", "cpu"]
    assert "nvidia.com/gpu" not in str(container(cpu)["resources"])


def test_k8s_termination_grace_outlasts_the_graceful_shutdown() -> None:
    docs = k8s_docs()
    cpu = pod_spec(docs["Deployment/kernelopt-worker-cpu"])["terminationGracePeriodSeconds"]
    gpu = pod_spec(docs["Deployment/kernelopt-worker-gpu-h200"])["terminationGracePeriodSeconds"]
    assert cpu >= GRACE + CPU_MARGIN
    assert gpu >= GRACE + GPU_MARGIN


def test_k8s_setup_job_runs_the_setup_script() -> None:
    job = k8s_docs()["Job/kernelopt-setup"]
    c = container(job)
    assert c["command"] == ["tini", "--", "python", "/opt/kernelopt/deploy/setup_temporal.py"]
    assert (DEPLOY / "setup_temporal.py").is_file()
    assert pod_spec(job)["restartPolicy"] in ("OnFailure", "Never")
    assert job["spec"]["backoffLimit"] >= 1
    assert "KERNELOPT_API_KEY" in _env(job)
