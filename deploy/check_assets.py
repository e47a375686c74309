#!/usr/bin/env python3
"""Checks of the deploy assets that no offline tool makes; deploy/check runs them.

  check_assets.py monitoring
      deploy/monitoring/alerts.yml: valid YAML; every rule has alert, expr, for, labels
      (severity) and annotations (summary, description); every metric an expression names
      is one the daemon declares. grafana-dashboard.json: valid JSON, every panel queries
      declared metrics, and every metric docs/operations.md "Operating it" lists has a panel.

  check_assets.py kubernetes --im-bridge BIN RENDERED.yaml...
      Each file is one `kubectl kustomize` output. The Deployment's probes, ports, security
      context, resources and volumes agree with the daemon's configuration in the rendered
      ConfigMap (admin port, store, shutdown grace); an SQLite store means one replica and
      the Recreate strategy; Service and PodDisruptionBudget select the pods; and the
      ConfigMap's config.yaml passes `im-bridge check-config` with the environment the
      Deployment gives it (secret values replaced by placeholders).

The declared metrics are the `const NAME: &str = "im_bridge_..."` strings in the daemon's
and the adapters' sources: the names the code exports, so a renamed metric fails here
before an alert silently stops firing. Exit status 1 with one line per problem.
"""

import argparse
import json
import pathlib
import re
import subprocess
import sys
import tempfile

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
# The page whose "Operating it" section lists the metrics an operator watches.
OPERATIONS = "docs/operations.md"
METRIC = re.compile(r"\bim_bridge_[a-z0-9_]+\b")
DECLARED = re.compile(r'const [A-Z0-9_]+: &str = "(im_bridge_[a-z0-9_]+)"')
DURATION = re.compile(r"^(0|([0-9]+(ms|s|m|h|d|w|y))+)$")
SEVERITIES = {"critical", "warning", "info"}
ENV_REF = re.compile(r"^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$")
# A value every validator accepts for a secret or an id (Telegram needs <digits>:<secret>).
PLACEHOLDER = "123456:placeholder_0"
PLACEHOLDER_POSTGRES = "postgres://im_bridge@postgres.invalid:5432/im_bridge"

problems = []


def problem(where, what):
    problems.append(f"{where}: {what}")


def declared_metrics():
    names = set()
    for pattern in ("src/**/*.rs", "channels/*/src/**/*.rs"):
        for path in ROOT.glob(pattern):
            names.update(DECLARED.findall(path.read_text(encoding="utf-8")))
    if len(names) < 10:
        problem("sources", f"found only {len(names)} declared metrics; has the declaration style changed?")
    return names


def operating_metrics():
    text = (ROOT / OPERATIONS).read_text(encoding="utf-8")
    match = re.search(r"^## Operating it\n(.*?)^## ", text, re.S | re.M)
    if not match:
        problem(OPERATIONS, 'no "## Operating it" section')
        return set()
    return set(METRIC.findall(match.group(1)))


def balanced(text):
    pairs = {")": "(", "]": "[", "}": "{"}
    stack = []
    for ch in text:
        if ch in "([{":
            stack.append(ch)
        elif ch in pairs:
            if not stack or stack.pop() != pairs[ch]:
                return False
    return not stack


def check_alerts(path, declared):
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        problem(path, f"not valid YAML: {error}")
        return
    groups = doc.get("groups") if isinstance(doc, dict) else None
    if not groups:
        problem(path, "no `groups`")
        return
    seen = set()
    for group in groups:
        rules = group.get("rules") or []
        if not group.get("name") or not rules:
            problem(path, "every group needs a name and rules")
        for i, rule in enumerate(rules):
            where = f"{path}: {group.get('name')}[{i}] {rule.get('alert', '?')}"
            for key in ("alert", "expr", "for", "labels", "annotations"):
                if key not in rule:
                    problem(where, f"missing `{key}`")
            name = rule.get("alert", "")
            if not re.fullmatch(r"[A-Z][A-Za-z0-9]+", str(name)):
                problem(where, "alert names are CamelCase")
            if name in seen:
                problem(where, "duplicate alert name")
            seen.add(name)
            expr = str(rule.get("expr", "")).strip()
            if not expr or not balanced(expr):
                problem(where, "empty or unbalanced expr")
            for metric in METRIC.findall(expr):
                if metric not in declared:
                    problem(where, f"{metric} is not a metric the daemon declares")
            if not DURATION.match(str(rule.get("for", ""))):
                problem(where, f"`for` is not a duration: {rule.get('for')!r}")
            if (rule.get("labels") or {}).get("severity") not in SEVERITIES:
                problem(where, f"labels.severity must be one of {sorted(SEVERITIES)}")
            annotations = rule.get("annotations") or {}
            for key in ("summary", "description"):
                text = annotations.get(key)
                if not isinstance(text, str) or not text.strip():
                    problem(where, f"annotations.{key} missing")
                elif text.count("{{") != text.count("}}"):
                    problem(where, f"annotations.{key}: unbalanced template braces")
    if not seen:
        problem(path, "no alert rules")


def check_dashboard(path, declared, listed):
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        problem(path, f"not valid JSON: {error}")
        return
    for key in ("title", "uid", "panels", "schemaVersion"):
        if key not in doc:
            problem(path, f"missing `{key}`")
    used = set()
    ids = set()
    for panel in doc.get("panels", []):
        where = f"{path}: panel {panel.get('title')!r}"
        if panel.get("id") in ids:
            problem(where, "duplicate panel id")
        ids.add(panel.get("id"))
        grid = panel.get("gridPos") or {}
        if grid.get("x", 0) + grid.get("w", 0) > 24:
            problem(where, "wider than the 24-column grid")
        if panel.get("type") == "row":
            continue
        targets = panel.get("targets") or []
        if not targets:
            problem(where, "no queries")
        for target in targets:
            expr = target.get("expr", "")
            if not expr or not balanced(expr):
                problem(where, f"empty or unbalanced query {expr!r}")
            for metric in METRIC.findall(expr):
                used.add(metric)
                if metric not in declared:
                    problem(where, f"{metric} is not a metric the daemon declares")
    for metric in sorted(listed - used):
        problem(path, f"no panel shows {metric} ({OPERATIONS} \"Operating it\")")


def monitoring(_args):
    declared = declared_metrics()
    listed = operating_metrics()
    for metric in sorted(listed - declared):
        problem(OPERATIONS, f'"Operating it" names {metric}, which no source declares')
    check_alerts(ROOT / "deploy/monitoring/alerts.yml", declared)
    check_dashboard(ROOT / "deploy/monitoring/grafana-dashboard.json", declared, listed)


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def check_rendered(path, binary):
    docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    by_kind = {}
    for doc in docs:
        by_kind.setdefault(doc.get("kind"), []).append(doc)
    deployments = by_kind.get("Deployment", [])
    if len(deployments) != 1:
        problem(path, f"expected one Deployment, found {len(deployments)}")
        return
    deploy = deployments[0]
    spec = deploy["spec"]
    pod = spec["template"]["spec"]
    pod_labels = spec["template"]["metadata"].get("labels", {})
    if not selects(spec["selector"].get("matchLabels"), pod_labels):
        problem(path, "the Deployment's selector does not match its pods")
    containers = [c for c in pod["containers"] if c["name"] == "im-bridge"]
    if len(containers) != 1:
        problem(path, "no container named im-bridge")
        return
    container = containers[0]
    ports = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}

    # The daemon's configuration, as the pod gets it.
    maps = {m["metadata"]["name"]: m for m in by_kind.get("ConfigMap", [])}
    config_text = None
    for volume in pod.get("volumes", []):
        if "configMap" in volume:
            name = volume["configMap"]["name"]
            if name not in maps:
                problem(path, f"volume {volume['name']} names ConfigMap {name}, which is not rendered")
            else:
                config_text = maps[name].get("data", {}).get("config.yaml")
    if config_text is None:
        problem(path, "no ConfigMap with config.yaml is mounted")
        return
    config = yaml.safe_load(config_text) or {}
    bridge = config.get("bridge") or {}
    channels = config.get("channels") or {}

    env = {}
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = var["value"]
        elif "secretKeyRef" in (var.get("valueFrom") or {}):
            ref = var["valueFrom"]["secretKeyRef"]
            env[var["name"]] = PLACEHOLDER_POSTGRES if var["name"] == "IM_BRIDGE_STORE" else PLACEHOLDER
            if not ref.get("name") or not ref.get("key"):
                problem(path, f"env {var['name']}: a secretKeyRef needs a name and a key")
    secret_refs = [e["secretRef"]["name"] for e in container.get("envFrom", []) if "secretRef" in e]

    def resolve(value):
        match = ENV_REF.match(str(value))
        if not match:
            return str(value)
        name = match.group(1)
        if name in env:
            return env[name]
        # From the Secret(s) mounted with envFrom: only a placeholder can be checked.
        return PLACEHOLDER if secret_refs else None

    admin = resolve(bridge.get("admin_listen", "127.0.0.1:9464"))
    host, _, port = (admin or "").rpartition(":")
    if host not in ("0.0.0.0", "[::]"):
        problem(path, f"bridge.admin_listen {admin!r}: probes and Prometheus need 0.0.0.0")
    if str(ports.get("admin")) != port:
        problem(path, f"container port `admin` {ports.get('admin')} is not the admin_listen port {port}")
    for probe, route in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = (container.get(probe) or {}).get("httpGet") or {}
        if get.get("path") != route or get.get("port") not in ("admin", ports.get("admin")):
            problem(path, f"{probe} must GET {route} on the admin port")

    context = container.get("securityContext") or {}
    pod_context = pod.get("securityContext") or {}
    if not (context.get("runAsNonRoot") or pod_context.get("runAsNonRoot")):
        problem(path, "runAsNonRoot is not set")
    if context.get("readOnlyRootFilesystem") is not True:
        problem(path, "readOnlyRootFilesystem is not true")
    if context.get("allowPrivilegeEscalation") is not False:
        problem(path, "allowPrivilegeEscalation is not false")
    resources = container.get("resources") or {}
    for part in ("requests", "limits"):
        if "memory" not in (resources.get(part) or {}):
            problem(path, f"resources.{part}.memory is not set")

    grace = float(channels.get("shutdown_grace_period_seconds", 3))
    termination = pod.get("terminationGracePeriodSeconds", 30)
    if termination <= 2 * grace + 5:
        problem(path, f"terminationGracePeriodSeconds {termination} does not cover the drain (2 x {grace} s + 5 s)")

    store = resolve(bridge.get("store", "sqlite://./im-bridge.db")) or ""
    replicas = spec.get("replicas", 1)
    if store.startswith("sqlite://"):
        if replicas != 1:
            problem(path, f"an SQLite store allows one replica, not {replicas}")
        if (spec.get("strategy") or {}).get("type") != "Recreate":
            problem(path, "an SQLite store needs the Recreate strategy (one daemon holds the file)")
        db = pathlib.PurePosixPath(store[len("sqlite://"):])
        if not db.is_absolute():
            db = pathlib.PurePosixPath(container.get("workingDir", "/")) / db
        mounts = {m["name"]: m["mountPath"] for m in container.get("volumeMounts", [])}
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        holder = [n for n, p in mounts.items() if str(db.parent) == p]
        if not holder:
            problem(path, f"no volume is mounted at {db.parent}, where the SQLite store lives")
        elif "persistentVolumeClaim" not in volumes.get(holder[0], {}):
            problem(path, f"the SQLite store's volume {holder[0]} is not a PersistentVolumeClaim")
        else:
            claim = volumes[holder[0]]["persistentVolumeClaim"]["claimName"]
            if claim not in {c["metadata"]["name"] for c in by_kind.get("PersistentVolumeClaim", [])}:
                problem(path, f"PersistentVolumeClaim {claim} is not rendered")
    elif not store.startswith(("postgres://", "postgresql://")):
        problem(path, f"bridge.store resolves to neither sqlite:// nor postgres:// ({store[:12]!r}...)")

    for service in by_kind.get("Service", []):
        if not selects(service["spec"].get("selector"), pod_labels):
            problem(path, f"Service {service['metadata']['name']} selects no im-bridge pod")
        for sp in service["spec"].get("ports", []):
            target = sp.get("targetPort")
            if isinstance(target, str) and target not in ports:
                problem(path, f"Service port {sp.get('name')} targets {target}, which the container does not name")
    budgets = by_kind.get("PodDisruptionBudget", [])
    if not budgets:
        problem(path, "no PodDisruptionBudget")
    for pdb in budgets:
        if not selects(pdb["spec"]["selector"].get("matchLabels"), pod_labels):
            problem(path, f"PodDisruptionBudget {pdb['metadata']['name']} selects no im-bridge pod")

    # What the daemon itself says about this configuration, in the pod's environment.
    with tempfile.TemporaryDirectory() as tmp:
        config_path = pathlib.Path(tmp) / "config.yaml"
        config_path.write_text(config_text, encoding="utf-8")
        run_env = {name: PLACEHOLDER for name in re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", config_text)}
        run_env.update(env)
        run_env.update({"PATH": "/usr/bin:/bin", "RUST_LOG": "warn"})
        out = subprocess.run(
            [binary, "check-config", "--config", str(config_path)],
            env=run_env, capture_output=True, text=True, check=False,
        )
        if out.returncode != 0:
            problem(path, "im-bridge check-config refused the ConfigMap's config.yaml:\n" + out.stderr)
        elif "warning" in out.stderr:
            problem(path, "im-bridge check-config warned about the ConfigMap's config.yaml:\n" + out.stderr)


def kubernetes(args):
    for rendered in args.rendered:
        check_rendered(pathlib.Path(rendered), args.im_bridge)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("monitoring").set_defaults(run=monitoring)
    kube = sub.add_parser("kubernetes")
    kube.add_argument("--im-bridge", required=True, help="the im-bridge binary")
    kube.add_argument("rendered", nargs="+", help="kubectl kustomize output, one file per overlay")
    kube.set_defaults(run=kubernetes)
    args = parser.parse_args()
    args.run(args)
    for line in problems:
        print(line, file=sys.stderr)
    if problems:
        sys.exit(1)


if __name__ == "__main__":
    main()
