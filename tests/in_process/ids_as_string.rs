//! IDs as JSON strings (docs/api.md, "IDs as strings"), on every backend:
//! `?as=string` makes `/next`, `/batch`, a lease and the snowflake routes
//! write their IDs as strings of digits, exact past 2^53 for a client that
//! reads JSON numbers as doubles; a lease answered so goes back with its
//! strings; a bad `as` is refused and consumes nothing.

use crate::support::common;
use crate::support::server;

use std::time::Duration;

use common::TestDb;
use reqwest::{Method, StatusCode};
use seqd::config::Settings;
use serde_json::{json, Value};
use server::TestServer;

/// 2^53 + 1: the first integer a double cannot hold.
const PAST_DOUBLES: i64 = 9_007_199_254_740_993;

/// `method path`: status and raw body.
async fn raw(s: &TestServer, method: Method, path: &str) -> (StatusCode, String) {
    let resp = s.send(method, path).await;
    (resp.status(), resp.text().await.unwrap())
}

/// `GET path`, which must answer 200: its JSON.
async fn ok(s: &TestServer, path: &str) -> Value {
    let (status, body) = raw(s, Method::GET, path).await;
    assert_eq!(status, StatusCode::OK, "{path}: {body}");
    serde_json::from_str(&body).unwrap()
}

async fn ids_past_doubles_are_exact_as_strings(db: TestDb) {
    let s = TestServer::start(Settings::for_database(db.url.clone())).await;
    let name = format!("big{}", std::process::id());
    let seq = format!("/v1/sequences/{name}");
    s.create(&name, PAST_DOUBLES, 100).await;

    let (status, body) = raw(&s, Method::GET, &format!("{seq}/next?as=string")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let exact = format!("{{\"name\":\"{name}\",\"id\":\"{PAST_DOUBLES}\"}}");
    assert_eq!(body, exact);

    // A bad `as` is refused before anything is drawn: the next ID follows.
    for bad in ["?as=text", "?as=", "?as=string&as=string", "?as=STRING"] {
        for route in ["next", "batch"] {
            let query = bad.replacen('?', "?count=2&", 1);
            let query = if route == "next" { bad } else { &query };
            let (status, body) = raw(&s, Method::POST, &format!("{seq}/{route}{query}")).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{route}{query}: {body}");
            let v: Value = serde_json::from_str(&body).unwrap();
            assert_eq!(v["error"]["code"], "invalid_request", "{query}: {v}");
        }
    }
    let v = ok(&s, &format!("{seq}/next?as=number")).await;
    assert_eq!(v["id"].as_i64(), Some(PAST_DOUBLES + 1), "{v}");
    let v = ok(&s, &format!("{seq}/batch?count=3&as=string")).await;
    let want: Vec<String> = (2..5).map(|i| (PAST_DOUBLES + i).to_string()).collect();
    assert_eq!(v["ids"], json!(want), "{v}");

    // A lease answered with strings goes back with them.
    let (status, body) = raw(&s, Method::POST, &format!("{seq}/lease?size=10&as=string")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let lease: Value = serde_json::from_str(&body).unwrap();
    let [start, end] = ["start", "end"].map(|k| lease[k].as_str().expect(k).to_owned());
    let first: i64 = start.parse().unwrap();
    assert_eq!(end.parse::<i64>().unwrap() - first, 10, "{lease}");
    assert!(first > PAST_DOUBLES + 4, "{lease}");
    let next = (first + 3).to_string();
    let give_back =
        |start: &str| json!({"start": start, "end": end, "next": next, "key": lease["key"]});
    let back = format!("{seq}/lease/return");
    let resp = s.send_json(Method::POST, &back, &give_back("1x")).await;
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let resp = s.send_json(Method::POST, &back, &give_back(&start)).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.json::<Value>().await.unwrap()["returned"], true);

    // Snowflake IDs: `id` and `ids` as strings too.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let v = loop {
        let (status, body) = raw(&s, Method::GET, "/v1/snowflake/next?as=string").await;
        if status == StatusCode::OK {
            break serde_json::from_str::<Value>(&body).unwrap();
        }
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert!(
            tokio::time::Instant::now() < deadline,
            "no worker ID within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(v["id"], v["id_str"], "{v}");
    assert!(v["id"].as_str().unwrap().parse::<i64>().is_ok(), "{v}");
    let v = ok(&s, "/v1/snowflake/batch?count=3&as=string").await;
    assert_eq!(v["ids"], v["ids_str"], "{v}");
    s.stop().await;
}

per_backend!(ids_past_doubles_are_exact_as_strings);
