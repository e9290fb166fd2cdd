//! `GET /openapi.json` from a running server: a valid OpenAPI 3 document
//! that describes exactly the routes the router serves, with the statuses
//! and the fields they really answer with.
//!
//! The served routes come from the table the router is built from
//! (`seqd::http::route_templates`), and probing each path with
//! each method gives its methods (an unserved method answers 405). So a route
//! or a method added without its `#[utoipa::path]` fails here. (Swagger UI's
//! pages under `/docs/`, merged from `utoipa-swagger-ui`, are not API
//! operations and not in the document; they have their own test below.)
//!
//! Error codes both ways: the document's code enum is exactly
//! `ErrorCode::ALL`, every code the server can send; and every documented
//! code is answered by a real request, each on a server set up for it
//! ([`provoke`]: a tiny concurrency limit, a short request timeout, a failing
//! or misconfigured store, a frozen snowflake clock...).

#[macro_use]
mod common;
mod server;

use std::collections::{BTreeMap, BTreeSet};

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use common::Backend;
use reqwest::{Method, StatusCode};
use seqd::allocator::{Allocator, AllocatorConfig};
use seqd::config::Secret;
use seqd::config::Settings;
use seqd::domain::{NamePrefix, NewSequence, SeqName};
use seqd::http::error::ErrorCode;
use seqd::http::limits::Limits;
use seqd::http::{router, AdminAuth, AppState};
use seqd::snowflake::{Layout, LeaseConfig, ManualWallClock, Snowflake, TickOutcome};
use seqd::store::memory::MemoryStore;
use seqd::store::{
    BumpMode, Bumped, Reservation, SequencePage, SequencePatch, SequenceRow, Store, StoreError,
    StripeRecord,
};
use serde_json::{json, Value};
use server::TestServer;

/// The methods probed on every path.
const METHODS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];

async fn start() -> (TestServer, common::TestDb) {
    let db = common::test_db(Backend::Sqlite)
        .await
        .expect("SQLite is always available");
    let server = TestServer::start(Settings::for_database(db.url.clone())).await;
    (server, db)
}

async fn fetch_doc(s: &TestServer) -> Value {
    let resp = s.http.get(s.url("/openapi.json")).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let ct = resp.headers()["content-type"].to_str().unwrap().to_string();
    assert!(ct.starts_with("application/json"), "{ct}");
    resp.json().await.expect("JSON")
}

/// `/v1/sequences/{name}` -> `/v1/sequences/{}`: parameter names may differ
/// between the router and the document (Leaf's `{key}`).
fn shape(path: &str) -> String {
    let mut out = String::new();
    let mut in_param = false;
    for c in path.chars() {
        match c {
            '{' => {
                in_param = true;
                out.push_str("{}");
            }
            '}' => in_param = false,
            _ if in_param => {}
            _ => out.push(c),
        }
    }
    out
}

/// `(METHOD, path)` of every operation in the document.
fn documented(doc: &Value) -> BTreeMap<String, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        let methods = item
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| {
                METHODS
                    .iter()
                    .chain(&["HEAD", "OPTIONS", "TRACE"])
                    .any(|m| m.eq_ignore_ascii_case(k))
            })
            .map(|k| k.to_ascii_uppercase())
            .collect();
        out.insert(path.clone(), methods);
    }
    out
}

/// A concrete URL path for a documented template.
fn concrete(path: &str) -> String {
    path.replace("{file}", "monitor.css")
        .replace("{name}", "order")
        .replace("{key}", "order")
        .replace("{id}", "2199023255552001")
}

/// Resolves a local `$ref`.
fn resolve<'a>(doc: &'a Value, reference: &str) -> &'a Value {
    let pointer = reference
        .strip_prefix('#')
        .unwrap_or_else(|| panic!("non-local $ref {reference}"));
    doc.pointer(pointer)
        .unwrap_or_else(|| panic!("dangling $ref {reference}"))
}

/// Every `$ref` anywhere in `v`.
fn refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("$ref", Value::String(r)) => out.push(r.clone()),
                    _ => refs(x, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
        _ => {}
    }
}

#[tokio::test]
async fn the_document_is_valid_openapi_3() {
    let (s, _db) = start().await;
    let doc = fetch_doc(&s).await;

    // Typed parse of the whole document (structure, field types) by an OpenAPI 3.1 model.
    let spec = oas3::from_json(doc.to_string()).expect("a structurally valid OpenAPI 3.1 document");
    assert!(spec.openapi.starts_with("3."), "{}", spec.openapi);
    assert_eq!(spec.info.title, "seqd");
    assert_eq!(spec.info.version, env!("CARGO_PKG_VERSION"));

    let mut all_refs = Vec::new();
    refs(&doc, &mut all_refs);
    assert!(!all_refs.is_empty());
    for r in &all_refs {
        resolve(&doc, r);
    }

    let mut operation_ids = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        assert!(path.starts_with('/'), "{path}");
        let templated: BTreeSet<&str> = path
            .split('/')
            .filter_map(|seg| seg.strip_prefix('{').and_then(|x| x.strip_suffix('}')))
            .collect();
        for (method, op) in item.as_object().unwrap() {
            let what = format!("{} {path}", method.to_uppercase());
            let id = op["operationId"]
                .as_str()
                .unwrap_or_else(|| panic!("{what}: no operationId"));
            assert!(
                operation_ids.insert(id.to_string()),
                "{what}: duplicate operationId {id}"
            );
            assert!(
                op["summary"].is_string() || op["description"].is_string(),
                "{what}: undocumented"
            );

            // Path parameters: exactly the template's, each required.
            let declared: BTreeSet<&str> = op["parameters"]
                .as_array()
                .map(|ps| ps.iter().filter(|p| p["in"] == "path").collect::<Vec<_>>())
                .unwrap_or_default()
                .into_iter()
                .map(|p| {
                    assert_eq!(
                        p["required"], true,
                        "{what}: path parameter {p} not required"
                    );
                    p["name"].as_str().unwrap()
                })
                .collect();
            assert_eq!(declared, templated, "{what}: path parameters");

            let responses = op["responses"]
                .as_object()
                .unwrap_or_else(|| panic!("{what}: no responses"));
            assert!(
                responses.keys().any(|k| k.starts_with('2')),
                "{what}: no success response"
            );
            for (status, resp) in responses {
                assert!(
                    resp["description"].is_string(),
                    "{what} {status}: no description"
                );
                if status.starts_with('4') || status.starts_with('5') {
                    // Every documented error answers JSON: the error schema (or, for
                    // /readyz, a body that carries it).
                    let schema = &resp["content"]["application/json"]["schema"];
                    assert!(
                        schema.is_object(),
                        "{what} {status}: error without a JSON body"
                    );
                    if path != "/readyz" {
                        assert_eq!(
                            schema["$ref"], "#/components/schemas/ErrorBody",
                            "{what} {status}"
                        );
                    }
                }
            }
        }
    }

    // The error schema: {"error": {"code", "message"}}, codes enumerated.
    let error = resolve(&doc, "#/components/schemas/ErrorBody");
    assert_eq!(error["required"], json!(["error"]));
    let detail = resolve(&doc, error["properties"]["error"]["$ref"].as_str().unwrap());
    assert_eq!(detail["required"], json!(["code", "message"]));
    assert!(
        documented_codes(&doc).contains("not_found"),
        "the codes are enumerated"
    );

    // The admin bearer scheme, on create and patch only.
    let scheme = &doc["components"]["securitySchemes"]["admin_token"];
    assert_eq!(
        (scheme["type"].as_str(), scheme["scheme"].as_str()),
        (Some("http"), Some("bearer")),
        "{scheme}"
    );
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let admin = matches!(
                (method.as_str(), path.as_str()),
                ("post", "/v1/sequences") | ("patch", "/v1/sequences/{name}")
            );
            let expected = if admin {
                json!([{"admin_token": []}])
            } else {
                Value::Null
            };
            assert_eq!(op["security"], expected, "{method} {path}");
        }
    }
    s.stop().await;
}

#[tokio::test]
async fn the_document_lists_exactly_the_routes_the_router_serves() {
    let (s, _db) = start().await;
    let doc = fetch_doc(&s).await;
    let documented = documented(&doc);

    // Paths: the router's (the table it is built from) against the document's.
    let served: BTreeSet<String> = seqd::http::route_templates()
        .into_iter()
        .map(shape)
        .collect();
    let listed: BTreeSet<String> = documented.keys().map(|p| shape(p)).collect();
    assert!(
        served.contains("/v1/sequences/{}/next"),
        "the route table holds {served:?}"
    );
    assert_eq!(
        served, listed,
        "routes served (left) vs paths in /openapi.json (right)"
    );

    // Methods: probe each path with each method. A documented method must be
    // served, with a documented status; any other must answer 405.
    let resp = s
        .http
        .post(s.url("/v1/sequences"))
        .json(&json!({"name": "order"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    for (path, methods) in &documented {
        for m in METHODS {
            let url = s.url(&concrete(path));
            let resp = s
                .http
                .request(Method::from_bytes(m.as_bytes()).unwrap(), &url)
                .send()
                .await
                .unwrap();
            let status = resp.status();
            let body = resp.text().await.unwrap_or_default();
            if methods.contains(m) {
                let op = &doc["paths"][path][m.to_ascii_lowercase()];
                let statuses: Vec<&String> = op["responses"].as_object().unwrap().keys().collect();
                assert!(
                    statuses.iter().any(|st| st.as_str() == status.as_str()),
                    "{m} {url}: answered {status}, documented {statuses:?}: {body}"
                );
            } else {
                assert_eq!(
                    status,
                    StatusCode::METHOD_NOT_ALLOWED,
                    "{m} {url} is served but not documented: {body}"
                );
                assert!(body.contains("method_not_allowed"), "{m} {url}: {body}");
            }
        }
    }
    s.stop().await;
}

/// Checks that `value` matches `schema`: the right JSON types, every required
/// property present, and no property the schema does not list.
fn conforms(doc: &Value, schema: &Value, value: &Value, at: &str) -> Result<(), String> {
    if let Some(r) = schema["$ref"].as_str() {
        return conforms(doc, resolve(doc, r), value, at);
    }
    if let Some(options) = schema["oneOf"].as_array().or(schema["anyOf"].as_array()) {
        let errors: Vec<String> = options
            .iter()
            .filter_map(|o| conforms(doc, o, value, at).err())
            .collect();
        return if errors.len() < options.len() {
            Ok(())
        } else {
            Err(errors.join("; "))
        };
    }
    if let Some(allowed) = schema["enum"].as_array() {
        if !allowed.contains(value) {
            return Err(format!("{at}: {value} not in {allowed:?}"));
        }
    }
    let types: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    let type_ok = types.is_empty()
        || types.iter().any(|t| match *t {
            "null" => value.is_null(),
            "object" => value.is_object(),
            "array" => value.is_array(),
            "string" => value.is_string(),
            "integer" => value.is_i64() || value.is_u64(),
            "number" => value.is_number(),
            "boolean" => value.is_boolean(),
            _ => false,
        });
    if !type_ok {
        return Err(format!("{at}: {value} is not of type {types:?}"));
    }
    if let (Some(obj), Some(props)) = (value.as_object(), schema["properties"].as_object()) {
        if let Some(key) = obj.keys().find(|k| !props.contains_key(*k)) {
            return Err(format!("{at}: field {key:?} is not documented"));
        }
        for req in schema["required"].as_array().into_iter().flatten() {
            if !obj.contains_key(req.as_str().unwrap_or_default()) {
                return Err(format!("{at}: documented required field {req} missing"));
            }
        }
        for (key, v) in obj {
            conforms(doc, &props[key], v, &format!("{at}.{key}"))?;
        }
    }
    if let (Some(items), Some(schema_items)) = (value.as_array(), schema.get("items")) {
        for (i, v) in items.iter().enumerate() {
            conforms(doc, schema_items, v, &format!("{at}[{i}]"))?;
        }
    }
    Ok(())
}

/// Sends `method path`, with `body` as JSON if given.
async fn request(
    s: &TestServer,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> reqwest::Response {
    let mut req = s
        .http
        .request(Method::from_bytes(method.as_bytes()).unwrap(), s.url(path));
    if let Some(b) = body {
        req = req.json(&b);
    }
    req.send().await.unwrap()
}

/// Sends `method path` and checks the JSON body against the documented
/// schema of the status it answered with.
async fn check_response(
    s: &TestServer,
    doc: &Value,
    method: &str,
    path: &str,
    template: &str,
    body: Option<Value>,
    expected: &[u16],
) -> Value {
    let resp = request(s, method, path, body).await;
    assert!(
        expected.contains(&resp.status().as_u16()),
        "{method} {path}: status {} (expected one of {expected:?})",
        resp.status()
    );
    let status = resp.status().as_u16().to_string();
    let value: Value = resp.json().await.expect("a JSON body");
    let documented = &doc["paths"][template][method.to_ascii_lowercase()]["responses"][&status];
    assert!(
        documented.is_object(),
        "{method} {path}: status {status} not documented"
    );
    let schema = &documented["content"]["application/json"]["schema"];
    assert!(
        schema.is_object(),
        "{method} {path} {status}: no documented JSON schema"
    );
    if let Err(e) = conforms(doc, schema, &value, &format!("{method} {path} {status}")) {
        panic!("{e}\nbody: {value}");
    }
    value
}

/// One request of [`real_responses_carry_exactly_the_documented_fields`]:
/// method, path, documented template, JSON body, the statuses it may answer.
type Probe<'a> = (&'a str, &'a str, &'a str, Option<Value>, &'a [u16]);

#[tokio::test]
async fn real_responses_carry_exactly_the_documented_fields() {
    let (s, _db) = start().await;
    let doc = fetch_doc(&s).await;
    let one = "/v1/sequences/{name}";

    // (method, path, documented template, JSON body, expected statuses), sent in
    // this order: the first request creates "order", which the later ones read
    // and change.
    let requests: Vec<Probe> = vec![
        (
            "POST",
            "/v1/sequences",
            "/v1/sequences",
            Some(json!({"name": "order", "step": 10})),
            &[201],
        ),
        (
            "POST",
            "/v1/sequences",
            "/v1/sequences",
            Some(json!({"name": "order"})),
            &[409],
        ),
        (
            "POST",
            "/v1/sequences",
            "/v1/sequences",
            Some(json!({"name": "x", "bogus": 1})),
            &[400],
        ),
        (
            "GET",
            "/v1/sequences/order/next",
            "/v1/sequences/{name}/next",
            None,
            &[200],
        ),
        (
            "POST",
            "/v1/sequences/order/next",
            "/v1/sequences/{name}/next",
            None,
            &[200],
        ),
        (
            "GET",
            "/v1/sequences/order/batch?count=3",
            "/v1/sequences/{name}/batch",
            None,
            &[200],
        ),
        (
            "GET",
            "/v1/sequences/order/batch?count=0",
            "/v1/sequences/{name}/batch",
            None,
            &[400],
        ),
        (
            "GET",
            "/v1/sequences/nope/next",
            "/v1/sequences/{name}/next",
            None,
            &[404],
        ),
        // With a buffer: current and next segments, counters (checked below).
        ("GET", "/v1/sequences/order", one, None, &[200]),
        ("GET", "/v1/sequences/a%20b", one, None, &[400]),
        (
            "PATCH",
            "/v1/sequences/order",
            one,
            Some(json!({"step": 20, "description": "d"})),
            &[200],
        ),
        ("PATCH", "/v1/sequences/order", one, Some(json!({})), &[400]),
        ("GET", "/v1/sequences", "/v1/sequences", None, &[200]),
        (
            "GET",
            "/api/segment/get/nope",
            "/api/segment/get/{key}",
            None,
            &[404],
        ),
        ("GET", "/healthz", "/healthz", None, &[200]),
        ("GET", "/readyz", "/readyz", None, &[200]),
        ("GET", "/v1/info", "/v1/info", None, &[200]),
        // Snowflake: whatever the worker lease's state (200, or 503 before it is leased).
        (
            "GET",
            "/v1/snowflake/next",
            "/v1/snowflake/next",
            None,
            &[200, 503],
        ),
        (
            "POST",
            "/v1/snowflake/batch?count=2",
            "/v1/snowflake/batch",
            None,
            &[200, 503],
        ),
        (
            "GET",
            "/v1/snowflake/decode/2199023255552001",
            "/v1/snowflake/decode/{id}",
            None,
            &[200],
        ),
        (
            "GET",
            "/v1/snowflake/decode/-1",
            "/v1/snowflake/decode/{id}",
            None,
            &[400],
        ),
    ];
    let mut answers = Vec::new();
    for (method, path, template, body, expected) in requests {
        let value = check_response(&s, &doc, method, path, template, body, expected).await;
        answers.push((method, path, value));
    }
    // The body `method path` answered with (each of these is sent once).
    let answer = |method: &str, path: &str| -> &Value {
        let found = answers
            .iter()
            .find(|(m, p, _)| *m == method && *p == path)
            .unwrap_or_else(|| panic!("{method} {path} was not sent"));
        &found.2
    };

    let seq = answer("GET", "/v1/sequences/order");
    assert!(seq["buffer"]["current"].is_object(), "{seq}");
    let list = answer("GET", "/v1/sequences");
    assert_eq!(
        list["sequences"].as_array().map(Vec::len),
        Some(1),
        "{list}"
    );
    let decoded = answer("GET", "/v1/snowflake/decode/2199023255552001");
    assert_eq!(decoded["id_str"], "2199023255552001", "{decoded}");

    // The plain-text answers are documented as such.
    let text_ct = &doc["paths"]["/v1/sequences/{name}/next"]["get"]["responses"]["200"]["content"]
        ["text/plain"];
    assert!(
        text_ct.is_object(),
        "Accept: text/plain answer undocumented"
    );
    let leaf =
        &doc["paths"]["/api/segment/get/{key}"]["get"]["responses"]["200"]["content"]["text/plain"];
    assert!(leaf.is_object(), "Leaf route's text answer undocumented");
    s.stop().await;
}

#[tokio::test]
async fn swagger_ui_serves_the_document() {
    let (s, _db) = start().await;
    let resp = s.http.get(s.url("/docs")).send().await.unwrap(); // redirects to /docs/
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.url().path(), "/docs/");
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    assert!(resp.text().await.unwrap().contains("swagger-ui"));
    let init = s
        .http
        .get(s.url("/docs/swagger-initializer.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(init.status(), StatusCode::OK);
    let script = init.text().await.unwrap();
    assert!(script.contains("/openapi.json"), "{script}");
    s.stop().await;
}

/// The code enum of the document's error schema.
fn documented_codes(doc: &Value) -> BTreeSet<String> {
    let error = resolve(doc, "#/components/schemas/ErrorBody");
    let detail = resolve(doc, error["properties"]["error"]["$ref"].as_str().unwrap());
    let codes = resolve(doc, detail["properties"]["code"]["$ref"].as_str().unwrap());
    codes["enum"]
        .as_array()
        .unwrap_or_else(|| panic!("no enum in {codes}"))
        .iter()
        .map(|c| c.as_str().unwrap().to_owned())
        .collect()
}

/// What a code is called on the wire.
fn wire_name(code: ErrorCode) -> String {
    serde_json::to_value(code)
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned()
}

/// Every error answer names an `ErrorCode`, so `ErrorCode::ALL` is every code
/// the server can send.
#[tokio::test]
async fn every_code_the_server_can_send_is_documented() {
    let (s, _db) = start().await;
    let doc = fetch_doc(&s).await;
    let sendable: BTreeSet<String> = ErrorCode::ALL.iter().map(|c| wire_name(*c)).collect();
    assert_eq!(
        sendable.len(),
        ErrorCode::ALL.len(),
        "two codes share a name"
    );
    assert_eq!(
        sendable,
        documented_codes(&doc),
        "codes the server can send (left) vs codes in /openapi.json (right)"
    );
    s.stop().await;
}

/// One error answer: the request and what came back.
#[derive(Debug)]
struct Sent {
    method: &'static str,
    path: String,
    /// The documented operation the request went to, if it names the status
    /// (`None` for the answers any route may give: 404/405 fallbacks, 408,
    /// shedding, 500).
    template: Option<&'static str>,
    status: u16,
    retry_after: bool,
    body: Value,
}

async fn send(
    s: &TestServer,
    method: &'static str,
    path: &str,
    template: Option<&'static str>,
    body: Option<Value>,
) -> Sent {
    let resp = request(s, method, path, body).await;
    let status = resp.status().as_u16();
    let retry_after = resp.headers().contains_key("retry-after");
    Sent {
        method,
        path: path.to_owned(),
        template,
        status,
        retry_after,
        body: resp.json().await.expect("a JSON body"),
    }
}

/// A server on an in-memory store (no snowflake IDs: there is no database
/// for their worker lease), with `limits` and a 50 ms wait for segments.
async fn memory_server(store: &Arc<MemoryStore>, limits: Limits) -> TestServer {
    memory_server_with(store, limits, |_| {}).await
}

async fn memory_server_with(
    store: &Arc<MemoryStore>,
    limits: Limits,
    adjust: impl FnOnce(&mut Settings),
) -> TestServer {
    let mut settings = Settings::for_database("memory");
    settings.limits = limits;
    settings.allocator.wait_timeout = Duration::from_millis(50);
    settings.snowflake.enabled = false;
    adjust(&mut settings);
    TestServer::start_with_store(settings, store.clone()).await
}

/// A store whose every call fails as misconfigured.
struct MisconfiguredStore;

fn misconfigured<T>() -> Result<T, StoreError> {
    Err(StoreError::Config("password=hunter2 rejected".into()))
}

#[async_trait]
impl Store for MisconfiguredStore {
    async fn reserve(&self, _: &SeqName, _: i64) -> Result<Reservation, StoreError> {
        misconfigured()
    }
    async fn compare_and_set_max_id(
        &self,
        _: &SeqName,
        _: i64,
        _: i64,
    ) -> Result<bool, StoreError> {
        misconfigured()
    }
    async fn create(&self, _: &NewSequence) -> Result<SequenceRow, StoreError> {
        misconfigured()
    }
    async fn get(&self, _: &SeqName) -> Result<Option<SequenceRow>, StoreError> {
        misconfigured()
    }
    async fn list(&self) -> Result<Vec<SequenceRow>, StoreError> {
        misconfigured()
    }
    async fn list_page(
        &self,
        _: Option<&NamePrefix>,
        _: Option<&SeqName>,
        _: u32,
    ) -> Result<SequencePage, StoreError> {
        misconfigured()
    }
    async fn update(&self, _: &SeqName, _: &SequencePatch) -> Result<SequenceRow, StoreError> {
        misconfigured()
    }
    async fn bump(
        &self,
        _: Option<&[SeqName]>,
        _: i64,
        _: BumpMode,
    ) -> Result<Vec<Bumped>, StoreError> {
        misconfigured()
    }
    async fn migrate(&self) -> Result<(), StoreError> {
        misconfigured()
    }
    async fn ping(&self) -> Result<(), StoreError> {
        misconfigured()
    }
    fn backend(&self) -> &'static str {
        "misconfigured"
    }
    async fn stripe_record(&self) -> Result<Option<StripeRecord>, StoreError> {
        misconfigured()
    }
    async fn put_stripe_record(
        &self,
        _: &StripeRecord,
        _: bool,
    ) -> Result<StripeRecord, StoreError> {
        misconfigured()
    }
}

/// The snowflake route most codes are provoked on.
const SNOWFLAKE_NEXT: &str = "/v1/snowflake/next";

/// A wall-clock time well after the default snowflake epoch.
const NOW_MS: i64 = 1_750_000_000_000;

/// A server whose snowflake IDs come from `layout` on `clock` (frozen:
/// it moves only when the test says), leasing worker IDs in a fresh SQLite
/// database; with a worker ID claimed when `claim`.
async fn snowflake_server(
    layout: Layout,
    clock: &ManualWallClock,
    claim: bool,
) -> (TestServer, common::TestDb) {
    let db = common::test_db(Backend::Sqlite)
        .await
        .expect("SQLite is always available");
    let leases = common::connect_database(&db).await.leases();
    leases.migrate().await.expect("migrate");
    let sf = Snowflake::new(
        layout,
        Duration::from_millis(5),
        Arc::new(clock.clone()),
        leases,
        LeaseConfig::new(Duration::from_secs(30)),
    );
    if claim {
        let outcome = sf.tick().await;
        assert!(matches!(outcome, TickOutcome::Claimed(_)), "{outcome:?}");
    }
    let store = Arc::new(MemoryStore::new());
    let app = router(AppState {
        snowflake: Some(sf),
        ..AppState::new(
            Allocator::new(store.clone(), AllocatorConfig::default()),
            AdminAuth::OpenOnLoopback,
        )
    });
    (TestServer::serve_app(app, store).await, db)
}

/// Sets up the condition under which the server answers `code`, and sends
/// the request that gets it. The match is exhaustive: a new code does not
/// compile until it has its request here.
async fn provoke(code: ErrorCode) -> Sent {
    use ErrorCode::*;
    let store = Arc::new(MemoryStore::new());
    let plain = || memory_server(&store, Limits::default());
    let next = Some("/v1/sequences/{name}/next");
    let create = Some("/v1/sequences");
    match code {
        InvalidName => {
            send(
                &plain().await,
                "GET",
                "/v1/sequences/a%20b/next",
                next,
                None,
            )
            .await
        }
        InvalidCount => {
            let path = "/v1/sequences/order/batch?count=0";
            send(
                &plain().await,
                "GET",
                path,
                Some("/v1/sequences/{name}/batch"),
                None,
            )
            .await
        }
        InvalidRequest => {
            let body = json!({"name": "x", "bogus": 1});
            send(&plain().await, "POST", "/v1/sequences", create, Some(body)).await
        }
        Unauthorized => {
            let s = memory_server_with(&store, Limits::default(), |settings| {
                settings.admin_token = Some(Secret::new("the-token"));
            })
            .await;
            send(
                &s,
                "POST",
                "/v1/sequences",
                create,
                Some(json!({"name": "x"})),
            )
            .await
        }
        SequenceNotFound => {
            send(&plain().await, "GET", "/v1/sequences/nope/next", next, None).await
        }
        NotFound => send(&plain().await, "GET", "/no/such/route", None, None).await,
        MethodNotAllowed => send(&plain().await, "DELETE", "/v1/sequences", None, None).await,
        RequestTimeout => {
            // The segment fetch hangs longer than the request may take.
            store.insert("slow", 0, 10);
            store.close_gate();
            let limits = Limits {
                request_timeout: Duration::from_millis(200),
                ..Limits::default()
            };
            let s = memory_server_with(&store, limits, |settings| {
                settings.allocator.wait_timeout = Duration::from_secs(60);
            })
            .await;
            let sent = send(&s, "GET", "/v1/sequences/slow/next", None, None).await;
            store.open_gate();
            sent
        }
        SequenceExists => {
            let s = plain().await;
            let body = json!({"name": "order"});
            let first = send(&s, "POST", "/v1/sequences", create, Some(body.clone())).await;
            assert_eq!(first.status, 201, "{first:?}");
            send(&s, "POST", "/v1/sequences", create, Some(body)).await
        }
        SequenceExhausted => {
            store.insert("top", i64::MAX, 10);
            send(&plain().await, "GET", "/v1/sequences/top/next", next, None).await
        }
        SerialExhausted => {
            let s = plain().await;
            // A start past {seq:01} is refused at create: the one counter
            // the format holds is served, then the period is full.
            let body = json!({"name": "tiny", "format": "T{seq:01}", "start": 9});
            let created = send(&s, "POST", "/v1/sequences", create, Some(body)).await;
            assert_eq!(created.status, 201, "{created:?}");
            let last = send(&s, "GET", "/v1/sequences/tiny/next", next, None).await;
            assert_eq!(last.status, 200, "{last:?}");
            send(&s, "GET", "/v1/sequences/tiny/next", next, None).await
        }
        SequenceMisconfigured => {
            store.insert("broken", 0, 10);
            store.set_problem(
                "broken",
                seqd::store::RowProblem {
                    field: "format",
                    message: "the format has no counter token".into(),
                },
            );
            send(
                &plain().await,
                "GET",
                "/v1/sequences/broken/next",
                next,
                None,
            )
            .await
        }
        PayloadTooLarge => {
            let body = json!({"name": "x", "description": "d".repeat(128 * 1024)});
            send(&plain().await, "POST", "/v1/sequences", create, Some(body)).await
        }
        StorageUnavailable => {
            store.insert("down", 0, 10);
            store.set_failing("down", true);
            send(&plain().await, "GET", "/v1/sequences/down/next", next, None).await
        }
        Overloaded => overloaded(&store).await,
        SnowflakeDisabled => {
            send(
                &plain().await,
                "GET",
                SNOWFLAKE_NEXT,
                Some(SNOWFLAKE_NEXT),
                None,
            )
            .await
        }
        SnowflakeExhausted => {
            // Claimed in the last time unit of the layout; then the clock passes it.
            let runs_out = Layout::default().runs_out_at_ms();
            let clock = ManualWallClock::frozen(runs_out - 1);
            let (s, _db) = snowflake_server(Layout::default(), &clock, true).await;
            clock.set(runs_out);
            send(&s, "GET", SNOWFLAKE_NEXT, Some(SNOWFLAKE_NEXT), None).await
        }
        WorkerLeaseLost => {
            let clock = ManualWallClock::frozen(NOW_MS);
            let (s, _db) = snowflake_server(Layout::default(), &clock, false).await;
            send(&s, "GET", SNOWFLAKE_NEXT, Some(SNOWFLAKE_NEXT), None).await
        }
        ClockMovedBackwards => {
            let clock = ManualWallClock::frozen(NOW_MS);
            let (s, _db) = snowflake_server(Layout::default(), &clock, true).await;
            assert_eq!(s.get(SNOWFLAKE_NEXT).await.status(), StatusCode::OK);
            clock.set(NOW_MS - 1000);
            send(&s, "GET", SNOWFLAKE_NEXT, Some(SNOWFLAKE_NEXT), None).await
        }
        ClockStalled => {
            // More IDs than one time unit holds, and a clock that never moves.
            let clock = ManualWallClock::frozen(NOW_MS);
            let (s, _db) = snowflake_server(Layout::default(), &clock, true).await;
            let path = "/v1/snowflake/batch?count=10000";
            send(&s, "GET", path, Some("/v1/snowflake/batch"), None).await
        }
        Internal => {
            let mut settings = Settings::for_database("memory");
            settings.snowflake.enabled = false;
            let s = TestServer::start_with_store(settings, Arc::new(MisconfiguredStore)).await;
            let sent = send(&s, "GET", "/v1/sequences", None, None).await;
            let message = sent.body["error"]["message"].as_str().unwrap_or_default();
            assert!(!message.contains("hunter2"), "detail leaked: {message}");
            sent
        }
    }
}

/// With one request slot held by a request whose segment fetch hangs,
/// another request is shed.
async fn overloaded(store: &Arc<MemoryStore>) -> Sent {
    store.insert("held", 0, 10);
    store.close_gate();
    let limits = Limits {
        max_concurrency: 1,
        ..Limits::default()
    };
    let s = memory_server_with(store, limits, |settings| {
        settings.allocator.wait_timeout = Duration::from_secs(60);
    })
    .await;
    let held = tokio::spawn({
        let (http, url) = (s.http.clone(), s.url("/v1/sequences/held/next"));
        async move { http.get(url).send().await.unwrap().status() }
    });
    // The held request has its slot once the store sees its fetch.
    let seen = tokio::time::timeout(Duration::from_secs(20), async {
        while store.reserves("held") == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(seen.is_ok(), "the held request never reached the store");
    let sent = send(&s, "GET", "/healthz", None, None).await;
    store.open_gate();
    assert_eq!(
        held.await.unwrap(),
        StatusCode::OK,
        "the held request completes"
    );
    sent
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_code_is_sent_by_some_request() {
    let (s, _db) = start().await;
    let doc = fetch_doc(&s).await;
    s.stop().await;
    let error_body = json!({"$ref": "#/components/schemas/ErrorBody"});
    for name in documented_codes(&doc) {
        let code = *ErrorCode::ALL
            .iter()
            .find(|c| wire_name(**c) == name)
            .unwrap_or_else(|| panic!("{name} is documented but no ErrorCode"));
        let sent = provoke(code).await;
        let what = format!("{name}: {} {}", sent.method, sent.path);
        assert_eq!(sent.body["error"]["code"], name, "{what}: {sent:?}");
        assert_eq!(sent.status, code.status().as_u16(), "{what}: {sent:?}");
        assert_eq!(
            sent.retry_after,
            sent.status == 503,
            "{what}: Retry-After on every 503 only"
        );
        if let Err(e) = conforms(&doc, &error_body, &sent.body, &what) {
            panic!("{e}\nbody: {}", sent.body);
        }
        if let Some(template) = sent.template {
            let op = &doc["paths"][template][sent.method.to_ascii_lowercase()];
            let documented = &op["responses"][sent.status.to_string()];
            assert!(
                documented.is_object(),
                "{what}: status {} not documented",
                sent.status
            );
        }
    }
}
