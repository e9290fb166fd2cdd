//! The Kubernetes manifests of deploy/kubernetes and the Prometheus
//! operator's component (deploy/kubernetes/components/prometheus-operator,
//! rendered with the base by deploy/overlays/prometheus-operator), checked
//! three ways:
//!
//! - by the tools operators' pipelines run, with the very command lines of
//!   docs/deployment.md ("Checking the manifests", [`documented_checks`]):
//!   `kubernetes-validate --strict` against a current Kubernetes version
//!   ([`KUBERNETES_VERSION`]) on what `kubectl kustomize` renders of the base
//!   and of the overlay (the custom resources, ServiceMonitor and
//!   PrometheusRule, have no schema in kubernetes-validate, which names them
//!   in a warning and checks nothing: their shape is checked here) and on the
//!   example Secrets; `checkov` on the whole deploy directory with no failed
//!   check, a check skipped only with its reason beside it (a
//!   `checkov.io/skipN` annotation, a `checkov:skip=` comment) and only among
//!   [`SKIPS`];
//! - against the binary: every `SEQD_` variable the manifests set is one the
//!   container's subcommand reads (`seqd serve --help`, `seqd migrate
//!   --help`); the init container's `seqd migrate` then the instance's
//!   environment (TLS included) give a running instance whose probe paths
//!   answer 200 on the health listener;
//! - against each other: the grace period outlasts the preStop pause, the
//!   shutdown timeout and the give-back's bound; the init container migrates
//!   with the migrator's Secret and the instance runs with the instances'
//!   one, with the same image and security context; the probes and the scrape
//!   use the port `health`, which a Service names for the ServiceMonitor; the
//!   Services, the PodDisruptionBudget and the NetworkPolicy select the
//!   instances; the kustomization lists every manifest; the component's
//!   PrometheusRule holds exactly the rules of deploy/prometheus/seqd-alerts.yml
//!   and its dashboard is deploy/grafana/seqd-dashboard.json.
//!
//! kubernetes-validate and checkov come from PyPI: `.ci/run` installs them
//! into target/deploy-tools (looked for there and on the `PATH`); missing,
//! like kubectl, their tests are skipped with a line, or fail under
//! `SEQD_TEST_REQUIRE_ALL=1`.

use crate::support::common;
use crate::support::pki;
use crate::support::server;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_yaml_ng::Value;

/// The Kubernetes version the manifests are validated against: the newest
/// the pinned kubernetes-validate (1.37.0, `.ci/run`) knows.
const KUBERNETES_VERSION: &str = "1.37.0";

/// The checkov checks the manifests may skip, each for the reason written
/// beside it in the manifests (a skip not listed here fails the test).
const SKIPS: &[&str] = &[
    // Secrets as files rather than environment variables: seqd reads its
    // database URL and admin token from flags or the environment only.
    "CKV_K8S_35",
    // An image digest: the image is the operator's build; the tag is pinned
    // and pulled Always, kustomize `images:` can pin a digest.
    "CKV_K8S_43",
];

/// The checks of checkov's secret scan that secret.example.yaml (and only
/// it) may skip: its values are placeholders (`CHANGE-ME`), said beside each.
const PLACEHOLDER_SKIPS: &[&str] = &[
    // Basic auth credentials: the database URLs' placeholder passwords.
    "CKV_SECRET_4",
    // A high-entropy string: the admin token's placeholder.
    "CKV_SECRET_6",
];

/// The kinds of the Prometheus operator's custom resources, which
/// kubernetes-validate has no schema for.
const CUSTOM_KINDS: &[&str] = &["ServiceMonitor", "PrometheusRule"];

/// The overlay that renders the base with the Prometheus operator's component.
const OVERLAY: &str = "deploy/overlays/prometheus-operator";

/// The component itself.
const COMPONENT: &str = "deploy/kubernetes/components/prometheus-operator";

/// The manifests' directory.
fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes")
}

/// Every `.yaml` file of [`dir`], by name, sorted.
fn files() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir())
        .expect("deploy/kubernetes")
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    names.sort();
    names
}

/// The objects (documents that are not empty) of a YAML stream, `what` naming
/// it in a panic.
fn documents(text: &str, what: &str) -> Vec<Value> {
    use serde::Deserialize;
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("{what}: {e}")))
        .filter(|value| !value.is_null())
        .collect()
}

/// A file of the repository, as text.
fn repo_file(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Every object of every manifest (all documents of each file), with the
/// file it is in.
fn objects() -> Vec<(String, Value)> {
    let mut all = Vec::new();
    for name in files() {
        let text = std::fs::read_to_string(dir().join(&name)).unwrap();
        for value in documents(&text, &name) {
            all.push((name.clone(), value));
        }
    }
    all
}

/// The one object of `kind` named `name`.
fn object(kind: &str, name: &str) -> Value {
    let found: Vec<Value> = objects()
        .into_iter()
        .map(|(_, o)| o)
        .filter(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .collect();
    assert_eq!(found.len(), 1, "one {kind} {name}");
    found.into_iter().next().unwrap()
}

/// The Deployment `seqd`.
fn deployment() -> Value {
    object("Deployment", "seqd")
}

/// The only entry of a pod template's list `key` (`containers`,
/// `initContainers`).
fn only<'a>(workload: &'a Value, key: &str) -> &'a Value {
    let list = workload["spec"]["template"]["spec"][key]
        .as_sequence()
        .unwrap_or_else(|| panic!("no {key}"));
    assert_eq!(list.len(), 1, "one of {key}");
    &list[0]
}

/// The only container of a Deployment's pod template: the instance.
fn container(workload: &Value) -> &Value {
    only(workload, "containers")
}

/// The only init container of a Deployment's pod template: the migrator.
fn init_container(workload: &Value) -> &Value {
    only(workload, "initContainers")
}

/// The instance's and the migrator's containers, with the subcommand each
/// runs.
fn containers(d: &Value) -> [(&Value, &str); 2] {
    [(container(d), "serve"), (init_container(d), "migrate")]
}

/// The entry named `name` of a list of named entries (ports, mounts,
/// volumes, variables).
fn named<'a>(list: &'a Value, name: &str) -> &'a Value {
    let entries = list.as_sequence().expect("a list");
    let found = entries.iter().find(|e| e["name"] == name);
    found.unwrap_or_else(|| panic!("no entry {name} in {list:?}"))
}

/// The strings of a list of strings.
fn strings(list: &Value) -> Vec<&str> {
    let items = list
        .as_sequence()
        .unwrap_or_else(|| panic!("{list:?}: a list"));
    items
        .iter()
        .map(|i| i.as_str().expect("a string"))
        .collect()
}

/// A container's `env` entries.
fn env(container: &Value) -> &[Value] {
    container["env"].as_sequence().expect("env")
}

/// The literal value of `name` in a container's environment.
fn env_value<'a>(container: &'a Value, name: &str) -> &'a str {
    let value = named(&container["env"], name)["value"].as_str();
    value.unwrap_or_else(|| panic!("{name} set to a value"))
}

/// A duration as seqd's flags write it (`10s`, `500ms`, `2m`).
fn duration(text: &str) -> Duration {
    let split = text.find(|c: char| !c.is_ascii_digit()).expect("a unit");
    let n: u64 = text[..split].parse().expect("a number");
    match &text[split..] {
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(60 * n),
        unit => panic!("unit {unit} of {text}"),
    }
}

/// Where a PyPI tool of the tests is: target/deploy-tools/bin (`.ci/run`
/// installs it there) or the `PATH`. `None` (after `skipped: ...`) when it
/// is in neither, which fails under `SEQD_TEST_REQUIRE_ALL=1`.
fn tool(program: &str) -> Option<PathBuf> {
    let installed = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/deploy-tools/bin")
        .join(program);
    if installed.is_file() {
        return Some(installed);
    }
    common::tool_available(program).then(|| PathBuf::from(program))
}

/// The command lines of docs/deployment.md's "Checking the manifests" block
/// (its first `sh` block), which the tests below run as they stand.
fn documented_checks() -> Vec<String> {
    let doc = repo_file("docs/deployment.md");
    let at = doc
        .find("\n#### Checking the manifests\n")
        .expect("docs/deployment.md: a section \"Checking the manifests\"");
    let rest = &doc[at..];
    let start = rest.find("```sh\n").expect("its sh block") + "```sh\n".len();
    let end = start + rest[start..].find("```").expect("the block's end");
    let lines: Vec<String> = rest[start..end]
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect();
    assert!(!lines.is_empty(), "no command in the block");
    lines
}

/// The documented lines that run `program`.
fn documented_runs_of(program: &str) -> Vec<String> {
    let lines: Vec<String> = documented_checks()
        .into_iter()
        .filter(|l| l.split_whitespace().any(|word| word == program))
        .collect();
    assert!(!lines.is_empty(), "docs/deployment.md runs no {program}");
    lines
}

/// Whether every program of a command line (each stage of its pipeline) is
/// at hand ([`tool`]); `false` after a `skipped: ...` line, a failure
/// under `SEQD_TEST_REQUIRE_ALL=1`.
fn tools_of(line: &str) -> bool {
    line.split('|')
        .map(|stage| stage.split_whitespace().next().expect("a program"))
        .all(|program| tool(program).is_some())
}

/// Runs a command line with bash (`-o pipefail`: a failed stage fails the
/// line) in the repository's root, target/deploy-tools/bin first on the
/// `PATH`; what it printed.
async fn run_line(line: &str) -> common::Printed {
    let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/deploy-tools/bin");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let path = std::env::join_paths(std::iter::once(tools).chain(std::env::split_paths(&path)))
        .expect("PATH");
    let out = tokio::time::timeout(
        Duration::from_secs(300),
        tokio::process::Command::new("bash")
            .args(["-o", "pipefail", "-c", line])
            .env("PATH", path)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap_or_else(|_| panic!("{line} took over 300 s"))
    .unwrap_or_else(|e| panic!("{line}: {e}"));
    common::Printed {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The objects `kubectl kustomize` renders of `dir` (relative to the
/// repository); `None` without kubectl ([`tool`]).
async fn rendered(dir: &str) -> Option<Vec<Value>> {
    let line = format!("kubectl kustomize {dir}");
    if !tools_of(&line) {
        return None;
    }
    let printed = run_line(&line).await;
    assert!(printed.status.success(), "{line}: {printed:?}");
    Some(documents(&printed.stdout, &line))
}

/// Whether an object is one of the Prometheus operator's custom resources.
fn custom(o: &Value) -> bool {
    CUSTOM_KINDS.iter().any(|k| o["kind"] == *k)
}

#[tokio::test]
async fn kubernetes_validate_strict_accepts_the_base_the_overlay_and_the_example_secrets() {
    let lines = documented_runs_of("kubernetes-validate");
    if !lines.iter().all(|l| tools_of(l)) {
        return;
    }
    let mut validated = BTreeSet::new();
    for line in &lines {
        let version = format!("--kubernetes-version {KUBERNETES_VERSION}");
        assert!(
            line.contains("--strict") && line.contains(&version),
            "{line}"
        );
        // What the line validates: a rendering (`kubectl kustomize DIR |
        // ... -`) or files.
        let (what, expected) = match line.strip_prefix("kubectl kustomize ") {
            Some(rest) => {
                let dir = rest.split_whitespace().next().unwrap().to_owned();
                let objects = rendered(&dir).await.expect("kubectl");
                (dir, objects)
            }
            None => {
                let file = line.split_whitespace().last().unwrap().to_owned();
                let objects = documents(&repo_file(&file), &file);
                (file, objects)
            }
        };
        let printed = run_line(line).await;
        assert!(printed.status.success(), "{line}: {printed:?}");
        // One `passed` line per built-in object: none went unchecked.
        let builtin = expected.iter().filter(|o| !custom(o)).count();
        assert!(builtin > 0, "{line}");
        assert_eq!(
            printed.stdout.matches(" passed ").count(),
            builtin,
            "{line}: {printed:?}"
        );
        // A custom resource is named in a warning (no schema) and checked by
        // the_overlay_adds_a_service_monitor_on_the_health_port_the_rules_and_the_dashboard.
        let warned = format!("{}{}", printed.stdout, printed.stderr);
        for o in expected.iter().filter(|o| custom(o)) {
            let kind = o["kind"].as_str().unwrap();
            assert!(
                warned.contains(&format!("Couldn't find schema for kind {kind} ")),
                "{line}: {printed:?}"
            );
        }
        validated.insert(what);
    }
    let wanted = [
        "deploy/kubernetes",
        OVERLAY,
        "deploy/kubernetes/secret.example.yaml",
    ];
    assert_eq!(
        validated,
        wanted
            .iter()
            .map(|w| w.to_string())
            .collect::<BTreeSet<_>>()
    );
}

#[tokio::test]
async fn checkov_finds_no_failed_check_and_skips_only_with_a_reason() {
    let lines = documented_runs_of("checkov");
    assert_eq!(lines.len(), 1, "{lines:?}");
    if !tools_of(&lines[0]) {
        return;
    }
    // The documented line as it stands, its report as JSON: the exit status
    // does not depend on the output's format. Not --quiet: it leaves the
    // skipped checks out of the report.
    let printed = run_line(&format!("{} --output json", lines[0])).await;
    let report: serde_json::Value = serde_json::from_str(&printed.stdout)
        .unwrap_or_else(|e| panic!("checkov's JSON: {e}: {printed:?}"));
    // One report per framework that found files (an object when only one did).
    let reports: Vec<serde_json::Value> = match report {
        serde_json::Value::Array(reports) => reports,
        one => vec![one],
    };
    let mut passed = std::collections::BTreeMap::new();
    let mut resources = BTreeSet::new();
    for report in &reports {
        let kind = report["check_type"].as_str().unwrap_or("?").to_owned();
        let results = &report["results"];
        let failed: Vec<String> = results["failed_checks"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| format!("{} {} {}", c["check_id"], c["resource"], c["file_path"]))
            .collect();
        assert!(failed.is_empty(), "checkov {kind} failed: {failed:#?}");
        assert_eq!(
            report["summary"]["failed"], 0,
            "{kind}: {}",
            report["summary"]
        );
        assert_eq!(
            report["summary"]["parsing_errors"], 0,
            "{kind}: {}",
            report["summary"]
        );
        for check in results["passed_checks"].as_array().into_iter().flatten() {
            resources.insert(check["resource"].as_str().unwrap_or("").to_owned());
        }
        for skipped in results["skipped_checks"].as_array().into_iter().flatten() {
            let id = skipped["check_id"].as_str().unwrap();
            let file = skipped["file_path"].as_str().unwrap_or("");
            let reason = skipped["check_result"]["suppress_comment"]
                .as_str()
                .unwrap_or("");
            let allowed = SKIPS.contains(&id)
                || (PLACEHOLDER_SKIPS.contains(&id) && file.ends_with("/secret.example.yaml"));
            assert!(
                allowed,
                "{id} skipped in {file}, not one of {SKIPS:?} {PLACEHOLDER_SKIPS:?}"
            );
            assert!(reason.len() > 20, "{id} skipped without a reason");
        }
        passed.insert(kind, report["summary"]["passed"].as_u64().unwrap_or(0));
    }
    // The manifests, their renderings (base and overlay) and the secrets
    // were all scanned.
    for kind in ["kubernetes", "kustomize", "secrets"] {
        assert!(
            passed.contains_key(kind),
            "checkov's {kind} scan: {passed:?}"
        );
    }
    for kind in ["kubernetes", "kustomize"] {
        assert!(
            passed[kind] > 50,
            "checkov ran its {kind} checks: {passed:?}"
        );
    }
    let overlay = format!("overlay:{}:", OVERLAY.trim_start_matches("deploy/"));
    for rendering in [
        "base:Deployment.seqd.seqd",
        &format!("{overlay}Deployment.seqd.seqd"),
    ] {
        assert!(
            resources.contains(rendering),
            "{rendering} in {resources:#?}"
        );
    }
    assert!(printed.status.success(), "{printed:?}");
}

/// The variables `seqd SUBCOMMAND --help` says it reads (`[env: NAME...]`).
fn variables_read(subcommand: &str) -> BTreeSet<String> {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_seqd"))
        .args([subcommand, "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    help.split("[env: ")
        .skip(1)
        .map(|rest| {
            rest.chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        })
        .collect()
}

#[test]
fn every_variable_set_is_one_the_subcommand_reads() {
    let d = deployment();
    for (c, subcommand) in containers(&d) {
        assert_eq!(c["args"], Value::from(vec![subcommand]), "{:?}", c["name"]);
        let read = variables_read(subcommand);
        assert!(read.contains("SEQD_DATABASE_URL"), "{read:?}");
        for e in env(c) {
            let name = e["name"].as_str().unwrap();
            assert!(name.starts_with("SEQD_"), "{name}: not seqd's");
            assert!(
                read.contains(name),
                "{name} is not read by `seqd {subcommand}` ({read:?})"
            );
        }
    }
}

#[test]
fn the_grace_period_outlasts_the_prestop_pause_the_shutdown_timeout_and_the_give_back() {
    let d = deployment();
    let pod = &d["spec"]["template"]["spec"];
    let c = container(&d);
    let grace = Duration::from_secs(pod["terminationGracePeriodSeconds"].as_u64().unwrap());
    // The native sleep action: the image has no shell to run `sleep` in.
    let pause = Duration::from_secs(
        c["lifecycle"]["preStop"]["sleep"]["seconds"]
            .as_u64()
            .expect("a preStop sleep"),
    );
    let shutdown = duration(env_value(c, "SEQD_SHUTDOWN_TIMEOUT"));
    // After the in-flight requests, the give-back of unused IDs.
    let give_back = seqd::startup::GIVE_BACK_BOUND;
    assert!(pause >= Duration::from_secs(1), "{pause:?}");
    assert!(
        grace > pause + shutdown + give_back,
        "grace {grace:?} <= preStop {pause:?} + shutdown timeout {shutdown:?} + give-back {give_back:?}"
    );
}

/// The Secret and key a container's variable `name` comes from.
fn secret_of(c: &Value, name: &str) -> (String, String) {
    let at = &named(&c["env"], name)["valueFrom"]["secretKeyRef"];
    let secret = at["name"]
        .as_str()
        .unwrap_or_else(|| panic!("{name} from a Secret"));
    (secret.to_owned(), at["key"].as_str().unwrap().to_owned())
}

#[test]
fn the_init_container_migrates_with_the_migrators_secret_the_instance_with_its_own() {
    // No Job: its immutable pod template stopped every re-apply with a new
    // image until it was deleted by hand.
    for (file, o) in objects() {
        assert!(
            o["kind"] != "Job" && o["kind"] != "CronJob",
            "{file}: {o:?}"
        );
    }
    let d = deployment();
    let (instance, migrator) = (container(&d), init_container(&d));
    assert_eq!(migrator["args"], Value::from(vec!["migrate"]));
    assert_eq!(env_value(instance, "SEQD_MIGRATE"), "off");
    // Two roles: the migrator's URL (DDL) only in the init container, the
    // instances' (row rights) and the admin token in the instance.
    let url = "database-url".to_owned();
    assert_eq!(
        secret_of(migrator, "SEQD_DATABASE_URL"),
        ("seqd-migrate".to_owned(), url.clone())
    );
    assert_eq!(
        secret_of(instance, "SEQD_DATABASE_URL"),
        ("seqd".to_owned(), url.clone())
    );
    assert_eq!(secret_of(instance, "SEQD_ADMIN_TOKEN").0, "seqd");
    let text = serde_yaml_ng::to_string(instance).unwrap();
    assert!(
        !text.contains("seqd-migrate"),
        "the instance reads the migrator's Secret"
    );
    for secret in ["seqd", "seqd-migrate"] {
        let example = object("Secret", secret);
        assert!(example["stringData"][url.as_str()].is_string(), "{secret}");
    }
    for key in ["image", "imagePullPolicy", "securityContext"] {
        assert_eq!(instance[key], migrator[key], "{key}");
    }
}

#[test]
fn the_pods_run_locked_down_with_resources_and_a_pinned_image() {
    let d = deployment();
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(pod["automountServiceAccountToken"], false);
    for (c, _) in containers(&d) {
        let security = &c["securityContext"];
        assert_eq!(security["runAsNonRoot"], true);
        assert_eq!(security["runAsUser"], 65532);
        assert_eq!(security["readOnlyRootFilesystem"], true);
        assert_eq!(security["allowPrivilegeEscalation"], false);
        assert_eq!(security["capabilities"]["drop"], Value::from(vec!["ALL"]));
        assert_eq!(security["seccompProfile"]["type"], "RuntimeDefault");
        for kind in ["requests", "limits"] {
            for resource in ["cpu", "memory"] {
                assert!(
                    c["resources"][kind][resource].is_string(),
                    "{kind}.{resource}"
                );
            }
        }
        let image = c["image"].as_str().unwrap();
        let tag = image.rsplit_once(':').map(|(_, t)| t).unwrap_or("");
        assert!(!tag.is_empty() && tag != "latest", "{image}: a pinned tag");
    }
}

/// Whether a selector's `matchLabels` (or a Service's `selector`) selects
/// `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    let pairs = selector.as_mapping().expect("a selector");
    !pairs.is_empty() && pairs.iter().all(|(k, v)| labels[k.as_str().unwrap()] == *v)
}

#[test]
fn services_budget_and_policy_select_the_instances_and_name_their_ports() {
    let d = deployment();
    assert!(d["spec"]["replicas"].as_u64().unwrap() >= 2);
    let labels = &d["spec"]["template"]["metadata"]["labels"];
    assert_eq!(d["spec"]["selector"]["matchLabels"], *labels);
    let c = container(&d);
    let port_of = |name: &str| named(&c["ports"], name)["containerPort"].as_u64().unwrap();
    // The Services: HTTP on 8080, RESP on 6380 and the health listener on
    // 8081, to the named ports.
    for (service, port) in [("seqd", 8080), ("seqd-resp", 6380), ("seqd-health", 8081)] {
        let s = object("Service", service);
        assert!(selects(&s["spec"]["selector"], labels), "{service}");
        let p = &s["spec"]["ports"][0];
        assert_eq!(p["port"], port, "{service}");
        assert_eq!(
            port_of(p["targetPort"].as_str().unwrap()),
            port,
            "{service}"
        );
    }
    let listen = |name| env_value(c, name).rsplit_once(':').unwrap().1.to_owned();
    assert_eq!(listen("SEQD_LISTEN"), port_of("http").to_string());
    assert_eq!(listen("SEQD_RESP_LISTEN"), port_of("resp").to_string());
    assert_eq!(listen("SEQD_HEALTH_LISTEN"), port_of("health").to_string());
    let pdb = object("PodDisruptionBudget", "seqd");
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    assert!(selects(&pdb["spec"]["selector"]["matchLabels"], labels));
    // The policy selects the instances and lets in every port they listen on.
    let policy = object("NetworkPolicy", "seqd");
    assert!(selects(
        &policy["spec"]["podSelector"]["matchLabels"],
        labels
    ));
    let allowed: BTreeSet<u64> = policy["spec"]["ingress"]
        .as_sequence()
        .unwrap()
        .iter()
        .flat_map(|rule| rule["ports"].as_sequence().unwrap())
        .map(|p| p["port"].as_u64().unwrap())
        .collect();
    for name in ["http", "resp", "health"] {
        assert!(
            allowed.contains(&port_of(name)),
            "{name} not let in: {allowed:?}"
        );
    }
}

#[test]
fn the_probes_and_the_scrape_use_the_health_listener() {
    let d = deployment();
    let c = container(&d);
    let health = named(&c["ports"], "health");
    assert_eq!(health["name"], "health");
    // Readiness (and start-up) on /readyz, which keeps the ride-through on
    // the buffers; liveness on /healthz; all on the health listener, plain
    // HTTP (it needs no client certificate).
    for (probe, path) in [
        ("startupProbe", "/readyz"),
        ("readinessProbe", "/readyz"),
        ("livenessProbe", "/healthz"),
    ] {
        let get = &c[probe]["httpGet"];
        assert_eq!(get["path"], path, "{probe}");
        assert_eq!(get["port"], "health", "{probe}");
        assert_eq!(get["scheme"], "HTTP", "{probe}");
    }
    // Scraping by annotation: /metrics on the same port, plain HTTP.
    let annotations = &d["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(annotations["prometheus.io/scrape"], "true");
    assert_eq!(annotations["prometheus.io/path"], "/metrics");
    assert_eq!(
        annotations["prometheus.io/port"],
        health["containerPort"].as_u64().unwrap().to_string()
    );
    assert_eq!(annotations["prometheus.io/scheme"], "http");
}

#[test]
fn tls_comes_from_a_secret_mounted_read_only() {
    let d = deployment();
    let c = container(&d);
    let mount = named(&c["volumeMounts"], "tls");
    assert_eq!(mount["readOnly"], true);
    let at = mount["mountPath"].as_str().unwrap();
    for (name, file) in [("SEQD_TLS_CERT", "tls.crt"), ("SEQD_TLS_KEY", "tls.key")] {
        assert_eq!(env_value(c, name), format!("{at}/{file}"));
    }
    let volume = named(&d["spec"]["template"]["spec"]["volumes"], "tls");
    let secret = volume["secret"]["secretName"].as_str().unwrap();
    // The example Secret of that name is of the TLS type (tls.crt, tls.key).
    assert_eq!(object("Secret", secret)["type"], "kubernetes.io/tls");
}

#[test]
fn the_kustomization_lists_every_manifest_but_the_example_secret() {
    let text = std::fs::read_to_string(dir().join("kustomization.yaml")).unwrap();
    let k: Value = serde_yaml_ng::from_str(&text).unwrap();
    let listed: BTreeSet<&str> = strings(&k["resources"]).into_iter().collect();
    let expected: BTreeSet<String> = files()
        .into_iter()
        .filter(|n| n != "kustomization.yaml" && n != "secret.example.yaml")
        .collect();
    assert_eq!(
        listed,
        expected.iter().map(String::as_str).collect::<BTreeSet<_>>()
    );
    // Placeholders only, in stringData.
    for (file, o) in objects() {
        if o["kind"] == "Secret" {
            assert_eq!(file, "secret.example.yaml");
            assert!(o["data"].is_null() && o["stringData"].is_mapping());
            let text = serde_yaml_ng::to_string(&o["stringData"]).unwrap();
            for value in o["stringData"].as_mapping().unwrap().values() {
                assert!(value.as_str().unwrap().contains("CHANGE-ME"), "{text}");
            }
        }
    }
}

/// The component's files: the PrometheusRule and the dashboard's copy.
fn component_file(name: &str) -> String {
    repo_file(&format!("{COMPONENT}/{name}"))
}

#[test]
fn the_prometheus_rule_and_the_dashboard_are_those_of_deploy_prometheus_and_grafana() {
    let alerts: Value = serde_yaml_ng::from_str(&repo_file("deploy/prometheus/seqd-alerts.yml"))
        .expect("seqd-alerts.yml");
    let rule: Value =
        serde_yaml_ng::from_str(&component_file("prometheusrule.yaml")).expect("prometheusrule");
    assert_eq!(rule["kind"], "PrometheusRule");
    assert!(alerts["groups"]
        .as_sequence()
        .is_some_and(|g| !g.is_empty()));
    assert_eq!(
        rule["spec"]["groups"], alerts["groups"],
        "prometheusrule.yaml's groups differ from deploy/prometheus/seqd-alerts.yml's"
    );
    // kustomize loads no file outside the component's directory: the
    // dashboard there is a copy, byte for byte.
    assert!(
        component_file("seqd-dashboard.json") == repo_file("deploy/grafana/seqd-dashboard.json"),
        "{COMPONENT}/seqd-dashboard.json differs from deploy/grafana/seqd-dashboard.json"
    );
}

/// The one object of `kind` named `name` among `objects`.
fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    let found: Vec<&Value> = objects
        .iter()
        .filter(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .collect();
    assert_eq!(found.len(), 1, "one {kind} {name}");
    found[0]
}

#[tokio::test]
async fn the_overlay_adds_a_service_monitor_on_the_health_port_the_rules_and_the_dashboard() {
    let (Some(base), Some(overlay)) =
        (rendered("deploy/kubernetes").await, rendered(OVERLAY).await)
    else {
        return;
    };
    let key = |o: &Value| {
        let name = |v: &Value| v.as_str().unwrap_or("").to_owned();
        (name(&o["kind"]), name(&o["metadata"]["name"]))
    };
    // The overlay is the base, plus the component's three objects.
    let (in_base, in_overlay): (BTreeSet<_>, BTreeSet<_>) = (
        base.iter().map(key).collect(),
        overlay.iter().map(key).collect(),
    );
    let added: BTreeSet<_> = in_overlay.difference(&in_base).cloned().collect();
    let expected = [
        ("ConfigMap", "seqd-grafana-dashboard"),
        ("PrometheusRule", "seqd"),
        ("ServiceMonitor", "seqd"),
    ];
    assert_eq!(
        added,
        expected
            .iter()
            .map(|(k, n)| (k.to_string(), n.to_string()))
            .collect::<BTreeSet<_>>()
    );
    assert!(in_base.is_subset(&in_overlay));
    assert!(!base.iter().any(custom), "the base needs no CRD");
    for o in &overlay {
        if o["kind"] != "Namespace" {
            assert_eq!(o["metadata"]["namespace"], "seqd", "{:?}", key(o));
        }
    }

    // The ServiceMonitor (checked here: kubernetes-validate has no schema for
    // it): it selects the one Service whose ports it names, a port that
    // reaches the instances' health listener, scraped at /metrics over HTTP.
    let monitor = find(&overlay, "ServiceMonitor", "seqd");
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    let services: Vec<&Value> = overlay
        .iter()
        .filter(|o| o["kind"] == "Service")
        .filter(|s| {
            selects(
                &monitor["spec"]["selector"]["matchLabels"],
                &s["metadata"]["labels"],
            )
        })
        .collect();
    assert_eq!(services.len(), 1, "the ServiceMonitor selects one Service");
    let service = services[0];
    let d = find(&overlay, "Deployment", "seqd");
    let c = container(d);
    assert!(selects(
        &service["spec"]["selector"],
        &d["spec"]["template"]["metadata"]["labels"]
    ));
    let endpoints = monitor["spec"]["endpoints"]
        .as_sequence()
        .expect("endpoints");
    assert!(!endpoints.is_empty());
    for endpoint in endpoints {
        assert_eq!(endpoint["port"], "health");
        assert_eq!(endpoint["path"], "/metrics");
        assert_eq!(endpoint["scheme"], "http");
        let port = named(&service["spec"]["ports"], "health");
        let target = port["targetPort"].as_str().expect("a named target port");
        assert_eq!(target, "health");
        assert_eq!(named(&c["ports"], target)["name"], "health");
    }
    // The job is the Service's label named by jobLabel: `seqd`, the job the
    // rules and the dashboard read.
    let job_label = monitor["spec"]["jobLabel"].as_str().expect("jobLabel");
    assert_eq!(service["metadata"]["labels"][job_label], "seqd");

    // The PrometheusRule: the rules of seqd-alerts.yml, which read job="seqd".
    let rule = find(&overlay, "PrometheusRule", "seqd");
    assert_eq!(rule["apiVersion"], "monitoring.coreos.com/v1");
    let alerts: Value =
        serde_yaml_ng::from_str(&repo_file("deploy/prometheus/seqd-alerts.yml")).unwrap();
    assert_eq!(rule["spec"]["groups"], alerts["groups"]);
    let rules = serde_yaml_ng::to_string(&rule["spec"]).unwrap();
    assert!(rules.contains("job=\"seqd\""), "{rules}");
    for group in rule["spec"]["groups"].as_sequence().unwrap() {
        assert!(group["name"].is_string());
        for r in group["rules"].as_sequence().expect("rules") {
            assert!(r["alert"].is_string() && r["expr"].is_string(), "{r:?}");
        }
    }

    // The dashboard, for Grafana's sidecar: the JSON file, one ConfigMap
    // under a fixed name.
    let map = find(&overlay, "ConfigMap", "seqd-grafana-dashboard");
    assert_eq!(map["metadata"]["labels"]["grafana_dashboard"], "1");
    let data = map["data"].as_mapping().expect("data");
    assert_eq!(data.len(), 1);
    assert_eq!(
        map["data"]["seqd-dashboard.json"].as_str(),
        Some(repo_file("deploy/grafana/seqd-dashboard.json").as_str())
    );
}

/// `GET path` over plain HTTP to `base` (`http://HOST:PORT`): the status.
async fn probe(base: &str, path: &str) -> u16 {
    let response = reqwest::get(format!("{base}{path}")).await;
    response
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .status()
        .as_u16()
}

/// The literal variables of a container (those from Secrets left out).
fn literal_env(c: &Value) -> Vec<(&str, &str)> {
    env(c)
        .iter()
        .filter_map(|e| Some((e["name"].as_str()?, e["value"].as_str()?)))
        .collect()
}

/// The init container's `seqd migrate`, then `seqd serve` with the
/// Deployment's environment (the Secret's values and the mounted files made
/// here; the listeners on 127.0.0.1): the probes' paths and the scrape path
/// answer 200 on the health listener. Without the init container, /readyz,
/// the startup probe's path, answers 503 (SEQD_MIGRATE=off) while /healthz
/// answers 200.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probe_paths_answer_on_an_instance_started_as_the_manifests_say() {
    let db = common::test_db(common::Backend::Sqlite).await.unwrap();
    let ca = pki::Pki::new("seqd deploy test CA");
    let pair = ca.server("server", 1);
    let (cert, key) = pair.paths();
    let d = deployment();
    let c = container(&d);
    let mut vars: Vec<(&str, &str)> = literal_env(c)
        .into_iter()
        .filter(|(name, _)| !name.starts_with("SEQD_TLS_"))
        .collect();
    vars.extend([
        ("SEQD_TLS_CERT", cert),
        ("SEQD_TLS_KEY", key),
        ("SEQD_ADMIN_TOKEN", "deploy-test-admin-token"),
    ]);
    let flags = [
        "--listen",
        "127.0.0.1:0",
        "--resp-listen",
        "127.0.0.1:0",
        "--health-listen",
        "127.0.0.1:0",
    ];
    let annotations = &d["spec"]["template"]["metadata"]["annotations"];
    let paths: Vec<&str> = ["startupProbe", "readinessProbe", "livenessProbe"]
        .iter()
        .map(|p| c[*p]["httpGet"]["path"].as_str().unwrap())
        .chain([annotations["prometheus.io/path"].as_str().unwrap()])
        .collect();

    let before = server::Process::spawn_with_env(&db.url, &flags, &vars).await;
    let health = before.health.clone().expect("the health listener");
    assert_eq!(probe(&health, "/readyz").await, 503, "before migrating");
    assert_eq!(probe(&health, "/healthz").await, 200);
    before.kill().await;

    let migrator = init_container(&d);
    let args = strings(&migrator["args"]);
    let mut migrate_env = literal_env(migrator);
    migrate_env.push(("SEQD_DATABASE_URL", &db.url));
    common::ok(&common::seqd_binary_with_env(&args, &migrate_env).await);

    let seqd = server::Process::spawn_with_env(&db.url, &flags, &vars).await;
    let health = seqd.health.clone().expect("the health listener");
    for path in paths {
        assert_eq!(probe(&health, path).await, 200, "{path}");
    }
    assert!(seqd.resp.is_some(), "the RESP door is open");
}
