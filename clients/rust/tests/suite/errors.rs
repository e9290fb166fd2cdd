//! What the client answers when things go wrong, against real seqd servers
//! (in-process, SQLite): unknown sequences, tokens, sequences that cannot be
//! leased, dead servers and failover, bad settings.

use crate::support;

use std::time::Duration;

use seqd_client::{Client, Error};
use support::{guarded, Server};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn client_of(servers: &[&str]) -> Client {
    Client::builder()
        .servers(servers.iter().copied())
        .lease_size(10)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// A server that answers every request `503 storage_unavailable` as seqd
/// does; its base URL.
async fn always_503() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut conn, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut got = Vec::new();
                // The request's head (the lease has no body).
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let body = r#"{"error":{"code":"storage_unavailable","message":"no IDs in memory and the database is unreachable or too slow; retry later"}}"#;
                let resp = format!(
                    "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
                     retry-after: 1\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(resp.as_bytes()).await;
            });
        }
    });
    format!("http://{addr}")
}

#[tokio::test]
async fn an_unknown_sequence_is_sequence_not_found() {
    let s = Server::start().await;
    let c = client_of(&[&s.base]);
    let err = guarded(c.next("missing")).await.unwrap_err();
    assert_eq!(
        err,
        Error::SequenceNotFound {
            name: "missing".into()
        }
    );
    assert_eq!(
        err.to_string(),
        "sequence 'missing' not found on the seqd server"
    );
    assert_eq!(c.batch("missing", 5).await.unwrap_err(), err);
    // Not remembered as missing: once created, it serves.
    s.create("missing", 1, 10).await;
    assert_eq!(c.next("missing").await.unwrap(), 1);
    s.stop().await;
}

#[tokio::test]
async fn an_invalid_name_is_refused_before_any_request() {
    // Nothing listens: a request would be `Unavailable`.
    let c = client_of(&[&support::dead_url().await]);
    for name in ["", "a/b", "../x", "a?size=5", "-x", &"n".repeat(129)] {
        let err = c.next(name).await.unwrap_err();
        assert!(matches!(err, Error::InvalidName { .. }), "{name:?}: {err}");
        assert!(matches!(
            c.batch(name, 0).await,
            Err(Error::InvalidName { .. })
        ));
        assert!(matches!(c.sequence(name), Err(Error::InvalidName { .. })));
    }
}

/// Under `--client-auth on`: a token with `draw` on the name serves; an
/// unknown token, or none, is `Unauthorized`; one not covering the name is
/// `Forbidden`. The token shows in no error and no `Debug` output.
#[tokio::test]
async fn tokens_under_client_auth() {
    let s = Server::with_client_auth().await;
    s.create("shop:order", 1, 100).await;
    let good = s.token("shop", "shop:", &["draw"]).await;
    let other = s.token("other", "other:", &["draw"]).await;
    let with = |token: Option<&str>| {
        let b = Client::builder().server(&s.base).lease_size(10);
        match token {
            Some(t) => b.token(t),
            None => b,
        }
        .build()
        .unwrap()
    };

    let c = with(Some(&good));
    assert_eq!(guarded(c.next("shop:order")).await.unwrap(), 1);
    assert!(
        c.close().await.returned > 0,
        "the give-back needs the token too"
    );

    let bogus = "seqd_this-token-does-not-exist-0123456789";
    for token in [Some(bogus), None] {
        let c = with(token);
        let err = guarded(c.next("shop:order")).await.unwrap_err();
        assert!(matches!(err, Error::Unauthorized { .. }), "{err}");
        assert!(err
            .to_string()
            .starts_with("unauthorized for sequence 'shop:order'"));
        assert!(!err.to_string().contains(bogus), "{err}");
        assert!(!format!("{err:?}").contains(bogus), "{err:?}");
    }

    let c = with(Some(&other));
    let err = guarded(c.next("shop:order")).await.unwrap_err();
    assert!(matches!(err, Error::Forbidden { .. }), "{err}");
    assert!(!err.to_string().contains(&other));

    let b = Client::builder().server(&s.base).token(good.clone());
    assert!(!format!("{b:?}").contains(&good), "{b:?}");
    let c = b.build().unwrap();
    assert!(!format!("{c:?}").contains(&good), "{c:?}");
    assert!(format!("{c:?}").contains("<redacted>"), "{c:?}");
    s.stop().await;
}

#[tokio::test]
async fn global_and_serial_sequences_are_not_leasable() {
    let s = Server::start().await;
    s.create_with(&serde_json::json!({"name": "gl", "step": 10, "ordering": "global"}))
        .await;
    s.create_with(&serde_json::json!({"name": "sr", "format": "S{yyyy}{seq:06}", "reset": "year"}))
        .await;
    let c = client_of(&[&s.base]);
    for (name, kind) in [("gl", "global"), ("sr", "serial")] {
        let err = guarded(c.next(name)).await.unwrap_err();
        let Error::NotLeasable { message, .. } = &err else {
            panic!("{name}: {err}");
        };
        assert!(message.contains(kind), "{err}");
        assert!(
            err.to_string()
                .starts_with(&format!("sequence '{name}' cannot be leased")),
            "{err}"
        );
    }
    s.stop().await;
}

/// A lease size above the server's `--max-lease` is the server's refusal,
/// not a failover.
#[tokio::test]
async fn a_lease_size_above_max_lease_is_rejected() {
    let s = Server::with_sequence("big", 10).await;
    let c = s.client(1_000_001);
    let err = guarded(c.next("big")).await.unwrap_err();
    let Error::Rejected { code, message, .. } = &err else {
        panic!("{err}");
    };
    assert_eq!(code, "invalid_request");
    assert!(message.contains("--max-lease"), "{err}");
    s.stop().await;
}

/// The first server's port is closed: the client leases from the second,
/// and goes on asking it first.
#[tokio::test]
async fn a_dead_first_server_fails_over_to_the_second() {
    let s = Server::with_sequence("f", 10).await;
    let dead = support::dead_url().await;
    let c = client_of(&[&dead, &s.base]);
    // 34: the last lease is short of its prefetch mark, so nothing is
    // fetched ahead at the close.
    let ids = guarded(c.batch("f", 34)).await.unwrap();
    assert_eq!(ids, (1..=34).collect::<Vec<_>>());
    assert_eq!(c.close().await.returned, 6, "given back to the second");
    s.stop().await;
}

/// A server answering 503 is passed over like a dead one.
#[tokio::test]
async fn a_server_answering_503_fails_over() {
    let s = Server::with_sequence("f5", 10).await;
    let busy = always_503().await;
    let c = client_of(&[&busy, &s.base]);
    assert_eq!(guarded(c.next("f5")).await.unwrap(), 1);

    let only_busy = client_of(&[&busy]);
    let err = guarded(only_busy.next("f5")).await.unwrap_err();
    let Error::Unavailable { attempts, .. } = &err else {
        panic!("{err}");
    };
    assert_eq!(attempts.len(), 1);
    assert!(
        attempts[0].reason.starts_with("503 storage_unavailable"),
        "{err}"
    );
    s.stop().await;
}

/// Two servers on one database: the first stops while the client draws;
/// the client goes on from the second, its IDs still increasing.
#[tokio::test]
async fn a_server_that_stops_midway_fails_over_and_order_holds() {
    let (_dir, url) = support::sqlite();
    let a = Server::on(seqd::config::Settings::for_database(url.clone())).await;
    let b = Server::on(seqd::config::Settings::for_database(url)).await;
    a.create("m", 1, 10).await;
    let c = Client::builder()
        .servers([a.base.clone(), b.base.clone()])
        .lease_size(10)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let mut ids = guarded(c.batch("m", 25)).await.unwrap();
    a.stop().await;
    // The lease fetched ahead came from the first; the ones after from the
    // second.
    ids.extend(guarded(c.batch("m", 60)).await.unwrap());
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    assert_eq!(ids.len(), 85);
    assert!(b.next("m").await > *ids.last().unwrap());
    b.stop().await;
}

/// Every server dead: `Unavailable`, naming each; the client keeps trying
/// on later calls (and serves once one is back).
#[tokio::test]
async fn every_server_dead_is_unavailable() {
    let (one, two) = (support::dead_url().await, support::dead_url().await);
    let c = client_of(&[&one, &two]);
    let err = guarded(c.next("x")).await.unwrap_err();
    let Error::Unavailable { name, attempts } = &err else {
        panic!("{err}");
    };
    assert_eq!(name, "x");
    let servers: Vec<&str> = attempts.iter().map(|a| a.server.as_str()).collect();
    assert_eq!(servers, [one.as_str(), two.as_str()]);
    let text = err.to_string();
    assert!(
        text.starts_with("no seqd server could lease IDs of sequence 'x': "),
        "{text}"
    );
    assert!(text.contains(&one) && text.contains(&two), "{text}");
    assert!(text.contains("connection failed"), "{text}");
    assert!(matches!(
        guarded(c.batch("x", 3)).await,
        Err(Error::Unavailable { .. })
    ));
    assert_eq!(c.close().await.returned, 0);
}

#[test]
fn bad_settings_are_config_errors() {
    let config = |b: seqd_client::ClientBuilder| match b.build() {
        Err(Error::Config(why)) => why,
        other => panic!("{other:?}"),
    };
    let base = || Client::builder().server("http://127.0.0.1:1");
    assert!(config(Client::builder()).contains("no server"));
    assert!(Client::builder()
        .server("https://seqd:8443")
        .build()
        .is_ok());
    assert!(config(Client::builder().server("not a url")).contains("not a url"));
    assert!(config(Client::builder().server("ftp://seqd")).contains("scheme"));
    assert!(config(base().lease_size(0)).contains("lease_size"));
    assert!(config(base().prefetch_at(1.5)).contains("prefetch_at"));
    assert!(config(base().prefetch_at(f64::NAN)).contains("prefetch_at"));
    assert!(config(base().timeout(Duration::ZERO)).contains("timeout"));
    let why = config(base().token("bad\ntoken-secret"));
    assert!(!why.contains("token-secret"), "{why}");
    let why = config(Client::builder().server("http://user:pw-secret@seqd:8080"));
    assert!(!why.contains("pw-secret"), "{why}");
    assert!(base()
        .server("http://127.0.0.1:2/prefix/")
        .prefetch_at(0.0)
        .build()
        .is_ok());
}
