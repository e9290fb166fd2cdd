//! The Kubernetes manifests of deploy/kubernetes, checked three ways:
//!
//! - by the tools operators' pipelines run: `kubernetes-validate --strict`
//!   against a current Kubernetes version ([`KUBERNETES_VERSION`]) and
//!   `checkov` with no failed check, a check skipped only with its reason
//!   beside it (a `checkov.io/skipN` annotation) and only among [`SKIPS`];
//! - against the binary: every `SEQD_` variable the manifests set is one the
//!   container's subcommand reads (`seqd serve --help`, `seqd migrate
//!   --help`); the Job's `seqd migrate` then the Deployment's environment
//!   (TLS included) give a running instance whose probe paths answer 200;
//! - against each other: the grace period outlasts the preStop pause, the
//!   shutdown timeout and the give-back's bound, the Job and the Deployment share the Secret, the
//!   image and the security context, the Services, the PodDisruptionBudget
//!   and the NetworkPolicy select the instances (and the Services not the
//!   Job's pod), the kustomization lists every manifest.
//!
//! kubernetes-validate and checkov come from PyPI: `.ci/run` installs them
//! into target/deploy-tools (looked for there and on the `PATH`); missing,
//! their tests are skipped with a line, or fail under
//! `SEQD_TEST_REQUIRE_ALL=1`.

mod common;
mod pki;
mod server;

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

/// Every object of every manifest (all documents of each file), with the
/// file it is in.
fn objects() -> Vec<(String, Value)> {
    use serde::Deserialize;
    let mut all = Vec::new();
    for name in files() {
        let text = std::fs::read_to_string(dir().join(&name)).unwrap();
        for doc in serde_yaml_ng::Deserializer::from_str(&text) {
            let value = Value::deserialize(doc).unwrap_or_else(|e| panic!("{name}: {e}"));
            if !value.is_null() {
                all.push((name.clone(), value));
            }
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

/// The migration Job.
fn job() -> Value {
    object("Job", "seqd-migrate")
}

/// The only container of a Deployment's or a Job's pod template.
fn container(workload: &Value) -> &Value {
    let containers = workload["spec"]["template"]["spec"]["containers"]
        .as_sequence()
        .expect("containers");
    assert_eq!(containers.len(), 1, "one container");
    &containers[0]
}

/// The entry named `name` of a list of named entries (ports, mounts,
/// volumes, variables).
fn named<'a>(list: &'a Value, name: &str) -> &'a Value {
    let entries = list.as_sequence().expect("a list");
    let found = entries.iter().find(|e| e["name"] == name);
    found.unwrap_or_else(|| panic!("no entry {name} in {list:?}"))
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

/// Runs `program` with `args` in the repository's root; what it printed.
async fn run_tool(program: &Path, args: &[&str]) -> common::Printed {
    let out = tokio::time::timeout(
        Duration::from_secs(300),
        tokio::process::Command::new(program)
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap_or_else(|_| panic!("{program:?} {args:?} took over 300 s"))
    .unwrap_or_else(|e| panic!("{program:?}: {e}"));
    common::Printed {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[tokio::test]
async fn kubernetes_validate_strict_accepts_every_manifest() {
    let Some(validate) = tool("kubernetes-validate") else {
        return;
    };
    // kustomization.yaml is kustomize's input, not an object of the API.
    let manifests: Vec<String> = files()
        .into_iter()
        .filter(|n| n != "kustomization.yaml")
        .map(|n| format!("deploy/kubernetes/{n}"))
        .collect();
    let mut args = vec!["--strict", "--kubernetes-version", KUBERNETES_VERSION];
    args.extend(manifests.iter().map(String::as_str));
    let printed = run_tool(&validate, &args).await;
    assert!(printed.status.success(), "{printed:?}");
    // One `passed` line per object: none went unchecked.
    let passed = printed.stdout.matches("passed").count();
    assert_eq!(passed, objects().len() - 1, "{printed:?}");
}

#[tokio::test]
async fn checkov_finds_no_failed_check_and_skips_only_with_a_reason() {
    let Some(checkov) = tool("checkov") else {
        return;
    };
    let printed = run_tool(
        &checkov,
        &[
            "--directory",
            "deploy/kubernetes",
            "--framework",
            "kubernetes",
            "--output",
            "json",
            // Not --quiet: it leaves the skipped checks out of the report.
            "--skip-download",
        ],
    )
    .await;
    let report: serde_json::Value = serde_json::from_str(&printed.stdout)
        .unwrap_or_else(|e| panic!("checkov's JSON: {e}: {printed:?}"));
    let results = &report["results"];
    let failed: Vec<String> = results["failed_checks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| format!("{} {} {}", c["check_id"], c["resource"], c["file_path"]))
        .collect();
    assert!(failed.is_empty(), "checkov failed: {failed:#?}");
    assert_eq!(report["summary"]["failed"], 0, "{printed:?}");
    assert!(
        report["summary"]["passed"].as_u64().unwrap_or(0) > 50,
        "checkov ran its checks: {}",
        report["summary"]
    );
    for skipped in results["skipped_checks"].as_array().into_iter().flatten() {
        let id = skipped["check_id"].as_str().unwrap();
        let reason = skipped["check_result"]["suppress_comment"]
            .as_str()
            .unwrap_or("");
        assert!(SKIPS.contains(&id), "{id} skipped, not one of {SKIPS:?}");
        assert!(reason.len() > 20, "{id} skipped without a reason");
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
    for (workload, subcommand) in [(deployment(), "serve"), (job(), "migrate")] {
        let c = container(&workload);
        assert_eq!(c["args"][0], subcommand, "{:?}", c["name"]);
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

#[test]
fn the_job_migrates_with_the_deployments_secret_image_and_security() {
    let (d, j) = (deployment(), job());
    let (dc, jc) = (container(&d), container(&j));
    assert_eq!(jc["args"], Value::from(vec!["migrate"]));
    assert_eq!(env_value(dc, "SEQD_MIGRATE"), "off");
    let secret =
        |c: &Value| named(&c["env"], "SEQD_DATABASE_URL")["valueFrom"]["secretKeyRef"].clone();
    assert!(secret(dc)["name"].is_string());
    assert_eq!(secret(dc), secret(jc));
    let token = named(&dc["env"], "SEQD_ADMIN_TOKEN");
    assert_eq!(
        token["valueFrom"]["secretKeyRef"]["name"],
        secret(dc)["name"]
    );
    for key in ["image", "imagePullPolicy", "securityContext"] {
        assert_eq!(dc[key], jc[key], "{key}");
    }
    let (dp, jp) = (
        &d["spec"]["template"]["spec"],
        &j["spec"]["template"]["spec"],
    );
    for key in [
        "securityContext",
        "serviceAccountName",
        "automountServiceAccountToken",
    ] {
        assert_eq!(dp[key], jp[key], "{key}");
    }
}

#[test]
fn the_pods_run_locked_down_with_resources_and_a_pinned_image() {
    for workload in [deployment(), job()] {
        let pod = &workload["spec"]["template"]["spec"];
        let c = container(&workload);
        let security = &c["securityContext"];
        assert_eq!(security["runAsNonRoot"], true);
        assert_eq!(security["runAsUser"], 65532);
        assert_eq!(security["readOnlyRootFilesystem"], true);
        assert_eq!(security["allowPrivilegeEscalation"], false);
        assert_eq!(security["capabilities"]["drop"], Value::from(vec!["ALL"]));
        assert_eq!(security["seccompProfile"]["type"], "RuntimeDefault");
        assert_eq!(pod["automountServiceAccountToken"], false);
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

#[test]
fn services_budget_and_policy_select_the_instances_and_name_their_ports() {
    let d = deployment();
    assert!(d["spec"]["replicas"].as_u64().unwrap() >= 2);
    let labels = &d["spec"]["template"]["metadata"]["labels"];
    let job_labels = &job()["spec"]["template"]["metadata"]["labels"];
    let selects = |selector: &Value, labels: &Value| {
        let pairs = selector.as_mapping().expect("a selector");
        !pairs.is_empty() && pairs.iter().all(|(k, v)| labels[k.as_str().unwrap()] == *v)
    };
    assert_eq!(d["spec"]["selector"]["matchLabels"], *labels);
    let c = container(&d);
    let port_of = |name: &str| named(&c["ports"], name)["containerPort"].as_u64().unwrap();
    // The Services: HTTP on 8080 and RESP on 6380, to the named ports,
    // never to the migration Job's pod.
    for (service, port) in [("seqd", 8080), ("seqd-resp", 6380)] {
        let s = object("Service", service);
        assert!(selects(&s["spec"]["selector"], labels), "{service}");
        assert!(!selects(&s["spec"]["selector"], job_labels), "{service}");
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
    let pdb = object("PodDisruptionBudget", "seqd");
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    assert!(selects(&pdb["spec"]["selector"]["matchLabels"], labels));
    let policy = object("NetworkPolicy", "seqd");
    assert!(selects(
        &policy["spec"]["podSelector"]["matchLabels"],
        labels
    ));
    // Prometheus scrapes /metrics on the HTTP port, over TLS.
    let annotations = &d["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(annotations["prometheus.io/scrape"], "true");
    assert_eq!(annotations["prometheus.io/path"], "/metrics");
    assert_eq!(
        annotations["prometheus.io/port"],
        port_of("http").to_string()
    );
    assert_eq!(annotations["prometheus.io/scheme"], "https");
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
    // The probes speak TLS as the doors do.
    for probe in ["startupProbe", "readinessProbe", "livenessProbe"] {
        assert_eq!(c[probe]["httpGet"]["scheme"], "HTTPS", "{probe}");
    }
}

#[test]
fn the_kustomization_lists_every_manifest_but_the_example_secret() {
    let text = std::fs::read_to_string(dir().join("kustomization.yaml")).unwrap();
    let k: Value = serde_yaml_ng::from_str(&text).unwrap();
    let listed: BTreeSet<&str> = k["resources"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
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

/// `GET path` over TLS to `addr`: the status.
async fn probe(addr: std::net::SocketAddr, ca: &Path, path: &str) -> u16 {
    let config = pki::client_config(ca, None);
    let mut stream = pki::connect(addr, &config).await.expect("TLS");
    pki::get(&mut stream, path).await.expect(path).0
}

/// The Job's `seqd migrate`, then `seqd serve` with the Deployment's
/// environment (the Secret's values and the mounted files made here; the
/// listeners on 127.0.0.1:0): the probes' paths and the scrape path answer
/// 200 over TLS. Before the Job has run, /readyz, the startup probe's path,
/// answers 503 (SEQD_MIGRATE=off) while /healthz answers 200.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probe_paths_answer_on_an_instance_started_as_the_manifests_say() {
    let db = common::test_db(common::Backend::Sqlite).await.unwrap();
    let ca = pki::Pki::new("seqd deploy test CA");
    let pair = ca.server("server", 1);
    let (cert, key) = pair.paths();
    let d = deployment();
    let c = container(&d);
    let mut vars: Vec<(&str, &str)> = env(c)
        .iter()
        .filter_map(|e| Some((e["name"].as_str()?, e["value"].as_str()?)))
        .filter(|(name, _)| !name.starts_with("SEQD_TLS_"))
        .collect();
    vars.extend([
        ("SEQD_TLS_CERT", cert),
        ("SEQD_TLS_KEY", key),
        ("SEQD_ADMIN_TOKEN", "deploy-test-admin-token"),
    ]);
    let flags = ["--listen", "127.0.0.1:0", "--resp-listen", "127.0.0.1:0"];
    let paths: Vec<&str> = ["startupProbe", "readinessProbe", "livenessProbe"]
        .iter()
        .map(|p| c[*p]["httpGet"]["path"].as_str().unwrap())
        .chain([
            d["spec"]["template"]["metadata"]["annotations"]["prometheus.io/path"]
                .as_str()
                .unwrap(),
        ])
        .collect();

    let before = server::Process::spawn_with_env(&db.url, &flags, &vars).await;
    let addr = before.base.trim_start_matches("http://").parse().unwrap();
    assert_eq!(
        probe(addr, &ca.ca, "/readyz").await,
        503,
        "before migrating"
    );
    assert_eq!(probe(addr, &ca.ca, "/healthz").await, 200);
    before.kill().await;

    let j = job();
    let migrate = std::process::Command::new(env!("CARGO_BIN_EXE_seqd"))
        .args(
            container(&j)["args"]
                .as_sequence()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap()),
        )
        .env("SEQD_DATABASE_URL", &db.url)
        .output()
        .unwrap();
    assert!(migrate.status.success(), "{migrate:?}");

    let seqd = server::Process::spawn_with_env(&db.url, &flags, &vars).await;
    let addr = seqd.base.trim_start_matches("http://").parse().unwrap();
    for path in paths {
        assert_eq!(probe(addr, &ca.ca, path).await, 200, "{path}");
    }
    assert!(seqd.resp.is_some(), "the RESP door is open");
}
