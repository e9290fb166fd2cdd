//! The container image and the compose file as users run them (docs/deployment.md): the
//! Dockerfile builds with a pinned toolchain onto a pinned non-root base, leaves probing to
//! the orchestrator (no HEALTHCHECK), exposes the HTTP and RESP ports and keeps the
//! binary's defaults; docker-compose.yml sets only variables `seqd serve` reads, and each
//! seqd waits for its database's healthcheck. Plain text checks: the files are small and
//! their shapes are fixed by these tests.
//!
//! Building and starting the image needs a container runtime and the base images, which
//! the test machines do not have (no registry of images is reachable); these tests read
//! the files only.

use std::collections::BTreeMap;
use std::process::Command;

use clap::CommandFactory;

fn read(file: &str) -> String {
    std::fs::read_to_string(format!("{}/{file}", env!("CARGO_MANIFEST_DIR")))
        .unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// One Dockerfile instruction: its keyword in capitals and its arguments, continuation
/// lines joined and comments left out.
struct Instruction {
    keyword: String,
    args: String,
}

fn instructions(dockerfile: &str) -> Vec<Instruction> {
    let mut out = Vec::new();
    let mut pending = String::new();
    for line in dockerfile.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && pending.is_empty()) {
            continue;
        }
        match trimmed.strip_suffix('\\') {
            Some(part) => {
                pending.push_str(part);
                pending.push(' ');
            }
            None => {
                pending.push_str(trimmed);
                let (keyword, args) = pending.split_once(' ').unwrap_or((&pending, ""));
                out.push(Instruction {
                    keyword: keyword.to_ascii_uppercase(),
                    args: args.trim().to_string(),
                });
                pending.clear();
            }
        }
    }
    out
}

/// The Dockerfile's stages: each FROM and the instructions after it.
fn stages() -> Vec<Vec<Instruction>> {
    let mut stages: Vec<Vec<Instruction>> = Vec::new();
    for instruction in instructions(&read("Dockerfile")) {
        if instruction.keyword == "FROM" {
            stages.push(Vec::new());
        }
        stages
            .last_mut()
            .expect("the Dockerfile starts with FROM")
            .push(instruction);
    }
    assert!(
        stages.len() >= 2,
        "a multi-stage build: {} stage(s)",
        stages.len()
    );
    stages
}

/// A FROM's image and its stage name, if any (`FROM [--platform=...] image [AS name]`).
fn from(stage: &[Instruction]) -> (String, Option<String>) {
    let words: Vec<&str> = stage[0]
        .args
        .split_whitespace()
        .filter(|w| !w.starts_with("--"))
        .collect();
    let name = match words.as_slice() {
        [_, kw, name] if kw.eq_ignore_ascii_case("as") => Some(name.to_string()),
        [_] => None,
        _ => panic!("FROM {}: unexpected shape", stage[0].args),
    };
    (words[0].to_string(), name)
}

/// The tag of an image reference (after the last `:` of its last path element).
fn tag(image: &str) -> Option<&str> {
    let image = image.split('@').next().unwrap_or(image);
    let last = image.rsplit('/').next().unwrap_or(image);
    last.split_once(':').map(|(_, tag)| tag)
}

fn args_of<'a>(stage: &'a [Instruction], keyword: &str) -> Vec<&'a str> {
    stage
        .iter()
        .filter(|i| i.keyword == keyword)
        .map(|i| i.args.as_str())
        .collect()
}

#[test]
fn every_base_image_is_pinned_and_the_build_names_its_rust_version() {
    let stages = stages();
    let mut names = Vec::new();
    for stage in &stages {
        let (image, name) = from(stage);
        // `FROM build`: an earlier stage, not an image.
        if names.contains(&image) {
            continue;
        }
        let pinned_by_digest = image.contains("@sha256:");
        let tag = tag(&image);
        assert!(
            pinned_by_digest || tag.is_some_and(|t| t != "latest"),
            "FROM {image}: a base image is pinned by a tag other than latest, or by digest"
        );
        names.extend(name);
    }
    let (build, _) = from(&stages[0]);
    assert!(
        build.rsplit('/').next().unwrap().starts_with("rust:"),
        "the first stage builds with the rust image: {build}"
    );
    // `1.95-bookworm`, not `1-bookworm` or `bookworm`: the minor version is the toolchain.
    let version = tag(&build).expect("the rust image's tag");
    let mut parts = version.split(['-', '.']);
    let (major, minor) = (parts.next(), parts.next());
    assert!(
        major == Some("1")
            && minor.is_some_and(|m| !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit())),
        "FROM {build}: the build stage names a Rust version (1.NN)"
    );
    let build_steps = args_of(&stages[0], "RUN").join("\n");
    assert!(
        build_steps.contains("cargo build --release --locked --bin seqd"),
        "the build stage builds the release binary from Cargo.lock: {build_steps}"
    );
}

#[test]
fn the_runtime_stage_runs_seqd_as_a_non_root_user_without_a_healthcheck() {
    let stages = stages();
    let runtime = stages.last().unwrap();
    let (base, _) = from(runtime);
    let users = args_of(runtime, "USER");
    let user = users.last().expect("the final stage sets USER");
    let name = user.split(':').next().unwrap();
    let non_root = match name.parse::<u32>() {
        Ok(uid) => uid != 0,
        Err(_) => name != "root",
    };
    assert!(non_root, "USER {user}: the image runs as a non-root user");
    // The CA store, for TLS to the database: distroless has it, other bases install it.
    let installs_ca = args_of(runtime, "RUN")
        .iter()
        .any(|run| run.contains("ca-certificates"));
    assert!(
        base.starts_with("gcr.io/distroless/") || installs_ca,
        "FROM {base}: the runtime has the system's CA store"
    );
    let all: Vec<&str> = stages
        .iter()
        .flatten()
        .map(|i| i.keyword.as_str())
        .collect();
    assert!(
        !all.contains(&"HEALTHCHECK"),
        "no HEALTHCHECK: the orchestrator probes /healthz and /readyz"
    );
    let exposed: Vec<&str> = args_of(runtime, "EXPOSE")
        .iter()
        .flat_map(|e| e.split_whitespace())
        .map(|port| port.trim_end_matches("/tcp"))
        .collect();
    for port in ["8080", "6380"] {
        assert!(exposed.contains(&port), "EXPOSE {port}: {exposed:?}");
    }
    let entrypoint = args_of(runtime, "ENTRYPOINT").join(" ");
    assert!(
        entrypoint.contains("/seqd\""),
        "the entry point is the binary (exec form): {entrypoint}"
    );
}

/// The flags of `seqd serve` by variable: (flag, its default if it has one).
fn serve_variables() -> BTreeMap<String, (String, Option<String>)> {
    let cli = seqd::config::Cli::command();
    let serve = cli.find_subcommand("serve").expect("seqd serve");
    serve
        .get_arguments()
        .filter_map(|arg| {
            let env = arg.get_env()?.to_string_lossy().into_owned();
            let default = arg
                .get_default_values()
                .iter()
                .map(|d| d.to_string_lossy().into_owned())
                .collect::<Vec<_>>();
            let default = (!default.is_empty()).then(|| default.join(" "));
            Some((env, (arg.get_id().to_string(), default)))
        })
        .collect()
}

#[test]
fn the_image_sets_no_variable_that_differs_from_the_binarys_default() {
    let variables = serve_variables();
    let mut set = Vec::new();
    for stage in stages() {
        for env in args_of(&stage, "ENV") {
            // `ENV A=1 B=2` or the old `ENV A 1`.
            let pairs: Vec<(String, String)> = if env.contains('=') {
                env.split_whitespace()
                    .filter_map(|p| p.split_once('='))
                    .map(|(k, v)| (k.to_string(), v.trim_matches('"').to_string()))
                    .collect()
            } else {
                let (k, v) = env.split_once(' ').unwrap_or((env, ""));
                vec![(k.to_string(), v.trim().to_string())]
            };
            set.extend(pairs.into_iter().filter(|(k, _)| k.starts_with("SEQD_")));
        }
    }
    for (name, value) in set {
        let (flag, default) = variables
            .get(&name)
            .unwrap_or_else(|| panic!("ENV {name}: not a variable of `seqd serve`"));
        assert_eq!(
            default.as_deref(),
            Some(value.as_str()),
            "ENV {name}={value}: differs from the default of {flag}; set it where the image runs"
        );
    }
}

/// docker-compose.yml's services, each with its lines (comments left out), read by
/// indentation: a service is a key two spaces under `services:`.
fn compose_services() -> BTreeMap<String, Vec<String>> {
    let compose = read("docker-compose.yml");
    let mut services: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut in_services = false;
    let mut current: Option<String> = None;
    for line in compose.lines() {
        let content = line.split(" #").next().unwrap_or(line).trim_end();
        if content.trim_start().starts_with('#') || content.trim().is_empty() {
            continue;
        }
        let indent = content.len() - content.trim_start().len();
        if indent == 0 {
            in_services = content == "services:";
            current = None;
        } else if in_services && indent == 2 {
            let name = content.trim().strip_suffix(':').expect("a service name");
            current = Some(name.to_string());
            services.entry(name.to_string()).or_default();
        } else if let Some(name) = &current {
            services.get_mut(name).unwrap().push(content.to_string());
        }
    }
    services
}

/// The lines of a key's block within a service (those indented under `key:`).
fn block<'a>(lines: &'a [String], key: &str) -> Vec<&'a str> {
    let Some(start) = lines.iter().position(|l| l.trim() == format!("{key}:")) else {
        return Vec::new();
    };
    let indent = lines[start].len() - lines[start].trim_start().len();
    lines[start + 1..]
        .iter()
        .take_while(|l| l.len() - l.trim_start().len() > indent)
        .map(|l| l.trim())
        .collect()
}

/// A service's environment, as `KEY: value` or `- KEY=value` lines.
fn environment(lines: &[String]) -> BTreeMap<String, String> {
    block(lines, "environment")
        .into_iter()
        .filter_map(|l| {
            let l = l.strip_prefix("- ").unwrap_or(l);
            let (k, v) = l.split_once(": ").or_else(|| l.split_once('='))?;
            Some((k.trim().to_string(), v.trim().trim_matches('"').to_string()))
        })
        .collect()
}

fn seqd_services(services: &BTreeMap<String, Vec<String>>) -> Vec<(&String, &Vec<String>)> {
    let seqds: Vec<_> = services
        .iter()
        .filter(|(_, lines)| lines.iter().any(|l| l.trim() == "build: ."))
        .collect();
    assert!(
        !seqds.is_empty(),
        "docker-compose.yml builds seqd: {services:?}"
    );
    seqds
}

#[test]
fn every_seqd_variable_the_compose_file_sets_is_one_seqd_serve_lists() {
    let help = Command::new(env!("CARGO_BIN_EXE_seqd"))
        .args(["serve", "--help"])
        .output()
        .expect("seqd serve --help");
    assert!(help.status.success(), "seqd serve --help: {help:?}");
    let help = String::from_utf8(help.stdout).unwrap();
    let services = compose_services();
    let mut checked = 0;
    for (name, lines) in &services {
        for variable in environment(lines).keys().filter(|k| k.starts_with("SEQD_")) {
            // clap prints `[env: SEQD_LISTEN=]`, with the value when one is set, and
            // `[env: SEQD_ADMIN_TOKEN]` for a secret, whose value it hides.
            assert!(
                help.contains(&format!("[env: {variable}="))
                    || help.contains(&format!("[env: {variable}]")),
                "{name}: {variable} is not a variable of `seqd serve --help`"
            );
            checked += 1;
        }
    }
    assert!(checked >= 4, "SEQD_ variables checked: {checked}");
}

#[test]
fn each_seqd_listens_beyond_the_container_publishes_on_loopback_and_waits_for_a_healthy_database() {
    let services = compose_services();
    for (name, lines) in seqd_services(&services) {
        let env = environment(lines);
        // The binary's default, 127.0.0.1:8080, is unreachable from outside the container.
        for (variable, port) in [("SEQD_LISTEN", "8080"), ("SEQD_RESP_LISTEN", "6380")] {
            assert_eq!(
                env.get(variable).map(String::as_str),
                Some(format!("0.0.0.0:{port}").as_str()),
                "{name}: {variable}"
            );
        }
        let ports = block(lines, "ports");
        assert!(!ports.is_empty(), "{name}: publishes its ports");
        for port in ports {
            assert!(
                port.trim_start_matches("- ")
                    .trim_matches('"')
                    .starts_with("127.0.0.1:"),
                "{name}: {port} is published on 127.0.0.1 only"
            );
        }
        // postgres://user:password@HOST:5432/db: the database's service.
        let url = env.get("SEQD_DATABASE_URL").expect("SEQD_DATABASE_URL");
        let host = url
            .split('@')
            .nth(1)
            .and_then(|rest| rest.split([':', '/']).next())
            .unwrap_or_else(|| panic!("{name}: host of {url}"));
        let database = services
            .get(host)
            .unwrap_or_else(|| panic!("{name}: {url} names no service"));
        let check = block(database, "healthcheck").join(" ");
        assert!(
            [
                "pg_isready",
                "healthcheck.sh",
                "mariadb-admin",
                "mysqladmin"
            ]
            .iter()
            .any(|tool| check.contains(tool)),
            "{host}: a healthcheck that asks the server: {check:?}"
        );
        let depends = block(lines, "depends_on");
        let at = depends
            .iter()
            .position(|l| *l == format!("{host}:"))
            .unwrap_or_else(|| panic!("{name}: depends_on {host}: {depends:?}"));
        assert_eq!(
            depends.get(at + 1).copied(),
            Some("condition: service_healthy"),
            "{name} starts once {host} is healthy"
        );
    }
    let databases: Vec<&str> = services
        .values()
        .filter_map(|lines| lines.iter().find_map(|l| l.trim().strip_prefix("image: ")))
        .collect();
    for kind in ["postgres:", "mariadb:"] {
        assert!(
            databases.iter().any(|image| image.contains(kind)),
            "docker-compose.yml runs {kind} {databases:?}"
        );
    }
}
