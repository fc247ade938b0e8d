"""The Helm chart renders, with its defaults and with every option (options.values.yaml),
into objects the Kubernetes API accepts (the client's OpenAPI models, strictly), with the
security settings the README promises, settings the bot loads, and a README that lists
every value."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.config import load_settings
from tests.deploy import chart, models

OPTIONS = Path(__file__).with_name("options.values.yaml")
RENDERINGS = {"defaults": (), "options": ("--values", str(OPTIONS))}
SECRETS_DIR = "/var/run/secrets/runbook-bot"


@pytest.fixture(params=sorted(RENDERINGS))
def rendered(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return chart.objects(*RENDERINGS[request.param])


def _kinds(objects: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        found.setdefault(obj["kind"], []).append(obj)
    return found


def _pods(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Pod templates by the name of the Deployment or Job that owns them."""
    return {
        o["metadata"]["name"]: o["spec"]["template"]
        for o in objects
        if o["kind"] in ("Deployment", "Job")
    }


def _config(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (config,) = [
        o for o in objects if o["kind"] == "ConfigMap" and "config.yaml" in o.get("data", {})
    ]
    settings: dict[str, Any] = yaml.safe_load(config["data"]["config.yaml"])
    return settings


def test_helm_lint_is_clean_with_defaults_and_options() -> None:
    for args in RENDERINGS.values():
        done = chart.run_helm("lint", "--strict", str(chart.CHART), *args)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "[WARNING]" not in done.stdout and "[ERROR]" not in done.stdout, done.stdout


def test_every_rendered_object_matches_the_kubernetes_openapi_models(
    rendered: list[dict[str, Any]],
) -> None:
    found = {f"{o['kind']}/{o['metadata']['name']}": models.problems(o) for o in rendered}

    assert {name: issues for name, issues in found.items() if issues} == {}
    assert len(found) == len(rendered)  # names are unique per kind


def test_the_strict_check_names_unknown_missing_and_mistyped_fields() -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "x"},
        "spec": {
            "selector": {},
            "template": {
                "spec": {"containers": [{"image": "x", "image_pull_policy": "Always"}]},
            },
            "replicas": "2",
        },
    }

    assert models.problems(deployment) == [
        "Deployment.spec.template.spec.containers[0]: unknown field image_pull_policy",
        "Deployment.spec.replicas: Input should be a valid integer",
        "Deployment.spec.template.spec.containers.0.name: Field required",
    ]
    assert models.problems({"apiVersion": "v9", "kind": "Gadget"}) == [
        "no Kubernetes model for v9 Gadget"
    ]


def test_the_defaults_make_two_spread_replicas_a_budget_a_hook_and_least_privilege() -> None:
    kinds = _kinds(chart.objects())
    (deployment,) = kinds["Deployment"]
    (budget,) = kinds["PodDisruptionBudget"]
    (job,) = kinds["Job"]

    assert deployment["spec"]["replicas"] == 2
    affinity = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    term = affinity["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert budget["spec"]["minAvailable"] == 1
    assert budget["spec"]["selector"]["matchLabels"] == term["labelSelector"]["matchLabels"]
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == ["db", "upgrade"]
    assert job["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
    assert "ServiceMonitor" not in kinds
    assert sorted(kinds) == sorted(
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "ConfigMap",
            "Deployment",
            "Job",
            "PodDisruptionBudget",
            "Role",
            "RoleBinding",
            "Secret",
            "Service",
            "ServiceAccount",
        ]
    )


def test_every_container_runs_non_root_read_only_without_capabilities(
    rendered: list[dict[str, Any]],
) -> None:
    pods = _pods(rendered)
    assert pods
    for owner, pod in pods.items():
        spec = pod["spec"]
        assert spec["securityContext"]["runAsNonRoot"] is True, owner
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, owner
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert "emptyDir" in volumes["tmp"], owner
        for container in spec["containers"]:
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True, owner
            assert context["allowPrivilegeEscalation"] is False, owner
            assert context["capabilities"] == {"drop": ["ALL"]}, owner
            assert context["seccompProfile"] == {"type": "RuntimeDefault"}, owner
            assert container["resources"]["requests"] and container["resources"]["limits"]
            mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
            assert mounts["/tmp"]["name"] == "tmp", owner
            assert all(m.get("readOnly") for p, m in mounts.items() if p != "/tmp"), owner


def test_the_server_is_live_on_healthz_and_ready_without_the_timers_check(
    rendered: list[dict[str, Any]],
) -> None:
    (server,) = [
        o
        for o in rendered
        if o["kind"] == "Deployment"
        and o["metadata"]["labels"]["app.kubernetes.io/component"] == "server"
    ]
    (container,) = server["spec"]["template"]["spec"]["containers"]

    assert container["args"] == ["serve"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {
        "path": "/readyz?exclude=timers",
        "port": "http",
    }
    assert server["spec"]["template"]["spec"]["serviceAccountName"] == "runbook-bot"


def test_secrets_stay_in_secrets_and_reach_the_bot_as_files() -> None:
    objects = chart.objects("--values", str(OPTIONS))
    text = yaml.safe_dump([o for o in objects if o["kind"] != "Secret"])
    (secret,) = [o for o in objects if o["kind"] == "Secret"]
    volume = next(
        v for v in _pods(objects)["runbook-bot"]["spec"]["volumes"] if v["name"] == "secrets"
    )
    sources = {
        item["path"]: (source["secret"]["name"], item["key"])
        for source in volume["projected"]["sources"]
        for item in source["secret"]["items"]
    }

    assert "Calvin-Not-Default-1" not in text  # the dell BMC password: only in the Secret
    assert sorted(secret["data"]) == ["bmc-dell"]
    assert sources == {
        "webhook/token": ("alertmanager-webhook", "token"),
        "slack/bot-token": ("runbook-bot-slack", "bot-token"),
        "slack/app-token": ("runbook-bot-slack", "app-token"),
        "bmc/default": ("bmc-logins", "default"),
        "bmc/dell": ("runbook-bot", "bmc-dell"),
        "console/session-secret": ("runbook-bot-console", "session-secret"),
        "console/admin-token": ("runbook-bot-console", "admin-token"),
        "log/key": ("runbook-bot-log-key", "key"),
    }


def test_the_options_run_separate_workers_with_budget_and_a_service_monitor() -> None:
    kinds = _kinds(chart.objects("--values", str(OPTIONS)))
    deployments = {d["metadata"]["name"]: d for d in kinds["Deployment"]}
    (monitor,) = kinds["ServiceMonitor"]
    (role,) = kinds["Role"]

    assert deployments["runbook-bot-worker"]["spec"]["replicas"] == 3
    worker = deployments["runbook-bot-worker"]["spec"]["template"]["spec"]["containers"][0]
    assert worker["args"] == ["worker"] and "readinessProbe" not in worker
    assert sorted(b["metadata"]["name"] for b in kinds["PodDisruptionBudget"]) == [
        "runbook-bot-server",
        "runbook-bot-worker",
    ]
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["spec"]["endpoints"] == [{"port": "http", "path": "/metrics", "interval": "15s"}]
    assert role["metadata"]["namespace"] == "gpu-diagnostics"
    (ingress,) = kinds["Ingress"]
    assert ingress["spec"]["ingressClassName"] == "nginx"
    assert ingress["spec"]["tls"] == [
        {"hosts": ["runbook-bot.example.com"], "secretName": "runbook-bot-tls"}
    ]
    (rule,) = ingress["spec"]["rules"]
    backend = rule["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": "runbook-bot", "port": {"name": "http"}}


@pytest.mark.parametrize("rendering", sorted(RENDERINGS))
def test_the_pods_settings_load_as_the_bot_reads_them(
    rendering: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """config.yaml from the ConfigMap and the container's RUNBOOK_BOT_* environment, with
    the mounted secret files under tmp_path, through the bot's own load_settings."""
    objects = chart.objects(*RENDERINGS[rendering])
    pod = _pods(objects)["runbook-bot"]
    text = yaml.safe_dump(_config(objects)).replace(SECRETS_DIR, str(tmp_path))
    for source in next(v for v in pod["spec"]["volumes"] if v["name"] == "secrets")["projected"][
        "sources"
    ]:
        for item in source["secret"]["items"]:
            path = tmp_path / item["path"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("s3cret-for-the-test-0123456789-and-more\n", encoding="utf-8")
    (tmp_path / "config.yaml").write_text(text, encoding="utf-8")
    for env in pod["spec"]["containers"][0]["env"]:
        if env["name"].startswith("RUNBOOK_BOT_") and "value" in env:
            monkeypatch.setenv(env["name"], env["value"])

    settings = load_settings(tmp_path / "config.yaml")

    assert settings.kube_in_cluster is True
    assert settings.listen_host == "0.0.0.0"
    assert settings.database_url.startswith("postgresql+psycopg://")
    assert settings.webhook_token_file == tmp_path / "webhook" / "token"
    assert settings.log_key_file == tmp_path / "log" / "key"
    assert settings.database_migration_url is None  # only the migrations Job is the owner
    if rendering == "options":
        assert (settings.listen_port, settings.serve_worker) == (9000, False)
        assert str(settings.runbooks_dir) == "/etc/runbook-bot/runbooks"
        assert settings.slack_mode == "socket"
        assert settings.node_job_namespace == "gpu-diagnostics"
        assert settings.bmc.credentials["dell"].password_file == tmp_path / "bmc" / "dell"
    else:
        assert (settings.listen_port, settings.serve_worker) == (8080, True)
        assert str(settings.runbooks_dir) == "/app/runbooks"
        assert settings.node_job_namespace == "runbook-bot"


def _env(pod: dict[str, Any]) -> dict[str, Any]:
    container = pod["spec"]["containers"][0]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


@pytest.mark.parametrize("rendering", sorted(RENDERINGS))
def test_only_the_migrations_job_connects_as_the_owner_role(rendering: str) -> None:
    objects = chart.objects(*RENDERINGS[rendering])
    pods = _pods(objects)
    job = _env(pods["runbook-bot-migrations"])
    owner, runtime = (
        ("bot_owner", "bot")
        if rendering == "options"
        else (
            "runbook_bot_owner",
            "runbook_bot",
        )
    )

    assert job["RUNBOOK_BOT_DATABASE_MIGRATION_URL"].startswith(f"postgresql+psycopg://{owner}@")
    assert job["RUNBOOK_BOT_DATABASE_URL"].startswith(f"postgresql+psycopg://{runtime}@")
    for name, pod in pods.items():
        if name == "runbook-bot-migrations":
            continue
        env = _env(pod)
        assert "RUNBOOK_BOT_DATABASE_MIGRATION_URL" not in env, name
        assert env["RUNBOOK_BOT_DATABASE_URL"].startswith(f"postgresql+psycopg://{runtime}@")
    if rendering == "options":
        assert job["PGPASSWORD"] == {
            "secretKeyRef": {"name": "runbook-bot-pg-owner", "key": "pg-password"}
        }
        server_password = _env(pods["runbook-bot"])["PGPASSWORD"]
        assert server_password == {"secretKeyRef": {"name": "runbook-bot-pg", "key": "pg-password"}}


def test_the_chart_generates_a_log_key_and_one_role_needs_saying_so() -> None:
    (secret,) = [o for o in chart.objects() if o["kind"] == "Secret"]
    assert len(base64.b64decode(secret["data"]["log-key"])) == 64
    one_role = chart.objects("--set", "database.owner.user=")
    job = _env(_pods(one_role)["runbook-bot-migrations"])
    assert "RUNBOOK_BOT_DATABASE_MIGRATION_URL" not in job


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            ["slack.enabled=true", "slack.existingSecret=slack"],
            "slack.channel: set the channel id incident cards go to",
        ),
        (
            ["slack.enabled=true", "slack.channel=C1", "slack.botToken=xoxb-1"],
            "slack.signingSecret: http mode needs the app's signing secret",
        ),
        (["bmc.credentials.default.username=admin"], "bmc.credentials.default: set password"),
        (["console.adminToken=short"], "console.adminToken: use at least 16 characters"),
        (["runbooks.files.bad/name=x"], "is not a runbook file name (name.yaml)"),
        (["database.host="], "database.host: set the PostgreSQL host"),
        (["ingress.enabled=true"], "ingress.enabled needs ingress.host"),
        (["database.owner.user=runbook_bot"], "database.owner.user: the owner role must differ"),
        (["logKey.key=short"], "logKey.key: use at least 32 characters"),
    ],
)
def test_a_bad_value_stops_the_rendering_saying_what_to_set(
    values: list[str], message: str
) -> None:
    args = [arg for value in values for arg in ("--set", value)]
    done = chart.run_helm("template", "runbook-bot", str(chart.CHART), *args)

    assert done.returncode == 1
    assert message in done.stderr


def _leaves(values: dict[str, Any], prefix: str = "") -> list[str]:
    found = []
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value and key != "resources" and name != "settings":
            found += _leaves(value, f"{name}.")
        else:
            found.append(name)
    return found


def test_the_readme_lists_every_value_and_nothing_else() -> None:
    values = yaml.safe_load((chart.CHART / "values.yaml").read_text(encoding="utf-8"))
    readme = (chart.CHART / "README.md").read_text(encoding="utf-8")
    listed = re.findall(r"^\| `([A-Za-z.]+)` \|", readme, flags=re.MULTILINE)

    assert sorted(listed) == sorted(_leaves(values))
