//! What the OpenAPI tests share: a server to read the document from, the
//! document's references resolved, a value checked against a schema, and
//! one request sent.

use std::collections::BTreeSet;

use common::Backend;
use reqwest::{Method, StatusCode};
use seqd::config::Settings;
use serde_json::Value;

use crate::support::common;
use crate::support::server::TestServer;

pub async fn start() -> (TestServer, common::TestDb) {
    let db = common::test_db(Backend::Sqlite)
        .await
        .expect("SQLite is always available");
    let server = TestServer::start(Settings::for_database(db.url.clone())).await;
    (server, db)
}

pub async fn fetch_doc(s: &TestServer) -> Value {
    let resp = s.get("/openapi.json").await;
    assert_eq!(resp.status(), StatusCode::OK);
    let ct = resp.headers()["content-type"].to_str().unwrap().to_string();
    assert!(ct.starts_with("application/json"), "{ct}");
    resp.json().await.expect("JSON")
}

/// Resolves a local `$ref`.
pub fn resolve<'a>(doc: &'a Value, reference: &str) -> &'a Value {
    let pointer = reference
        .strip_prefix('#')
        .unwrap_or_else(|| panic!("non-local $ref {reference}"));
    doc.pointer(pointer)
        .unwrap_or_else(|| panic!("dangling $ref {reference}"))
}

/// Checks that `value` matches `schema`: the right JSON types, every required
/// property present, and no property the schema does not list.
pub fn conforms(doc: &Value, schema: &Value, value: &Value, at: &str) -> Result<(), String> {
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
pub async fn request(
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

/// The code enum of the document's error schema.
pub fn documented_codes(doc: &Value) -> BTreeSet<String> {
    let error = resolve(doc, "#/components/schemas/ErrorBody");
    let detail = resolve(doc, error["properties"]["error"]["$ref"].as_str().unwrap());
    let codes = resolve(doc, detail["properties"]["code"]["$ref"].as_str().unwrap());
    common::strings(codes, "enum")
}
