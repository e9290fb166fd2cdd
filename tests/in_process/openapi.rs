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
//! Error codes both ways: tests/in_process/openapi_codes.rs.

use crate::support::openapi_doc;
use crate::support::server;

use std::collections::{BTreeMap, BTreeSet};

use openapi_doc::*;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use server::TestServer;

/// The methods probed on every path.
const METHODS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];

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
                // Tinyid's routes answer as Tinyid's server does: no body on the
                // Simple ones, Tinyid's error JSON on the others (413 aside,
                // answered by the edge before the route).
                let error = status.starts_with('4') || status.starts_with('5');
                let tinyid = error && path.starts_with("/tinyid/") && status != "413";
                if tinyid && path.ends_with("Simple") {
                    assert!(resp["content"].is_null(), "{what} {status}: a body");
                } else if tinyid {
                    let schema = &resp["content"]["application/json"]["schema"];
                    assert_eq!(
                        schema["$ref"], "#/components/schemas/TinyidErrorDoc",
                        "{what} {status}"
                    );
                } else if error {
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

    // The admin bearer scheme on the admin calls; the client-token scheme
    // (or the admin token, or none under --client-auth off) with 401 and
    // 403 on every drawing and reading call; nothing on the others.
    for name in ["admin_token", "client_token"] {
        let scheme = &doc["components"]["securitySchemes"][name];
        assert_eq!(
            (scheme["type"].as_str(), scheme["scheme"].as_str()),
            (Some("http"), Some("bearer")),
            "{scheme}"
        );
    }
    let mut client_ops = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let admin = matches!(
                (method.as_str(), path.as_str()),
                ("post", "/v1/sequences") | ("patch", "/v1/sequences/{name}")
            ) || path.starts_with("/v1/tokens");
            let reading = method == "get"
                && matches!(path.as_str(), "/v1/sequences" | "/v1/sequences/{name}");
            let drawing = path.ends_with("/next")
                || path.ends_with("/batch")
                || path.ends_with("/lease")
                || path.ends_with("/lease/return")
                || path.starts_with("/api/segment/get/")
                || path.starts_with("/api/snowflake/get/");
            let expected = if admin {
                json!([{"admin_token": []}])
            } else if reading || drawing {
                client_ops += 1;
                for status in ["401", "403"] {
                    assert!(
                        op["responses"][status].is_object(),
                        "{method} {path} lacks {status}"
                    );
                }
                json!([{"client_token": []}, {"admin_token": []}, {}])
            } else {
                Value::Null
            };
            assert_eq!(op["security"], expected, "{method} {path}");
        }
    }
    // next, batch and snowflake's two (GET and POST each), two Leaf routes,
    // two reads, a lease and its return.
    assert_eq!(client_ops, 14);
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
    let resp = s.get("/docs").await; // redirects to /docs/
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.url().path(), "/docs/");
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    assert!(resp.text().await.unwrap().contains("swagger-ui"));
    let init = s.get("/docs/swagger-initializer.js").await;
    assert_eq!(init.status(), StatusCode::OK);
    let script = init.text().await.unwrap();
    assert!(script.contains("/openapi.json"), "{script}");
    s.stop().await;
}
