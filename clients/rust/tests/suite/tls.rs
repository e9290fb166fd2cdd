//! The client over HTTPS, against a real server speaking TLS only
//! (`--tls-cert`, and `--tls-client-ca` for client certificates): a CA
//! given to the builder is trusted, a server it did not sign is refused,
//! a client certificate is presented when the server requires one.

use crate::pki;
use crate::support;

use seqd::tls::TlsFiles;
use seqd_client::{Client, Error};
use support::Server;

/// A server with a certificate `ca` signed, asking clients for one `ca`
/// signed when `client_ca`.
async fn serving(ca: &pki::Pki, client_ca: bool) -> Server {
    let cert = ca.server("server", 1);
    Server::with_tls(TlsFiles {
        cert: cert.cert,
        key: cert.key,
        client_ca: client_ca.then(|| ca.ca.clone()),
    })
    .await
}

/// `pair`'s certificate then its key, PEM.
fn identity(pair: &pki::Pair) -> Vec<u8> {
    let mut pem = std::fs::read(&pair.cert).unwrap();
    pem.extend(std::fs::read(&pair.key).unwrap());
    pem
}

/// A client of `server` trusting `ca` (PEM), with `me` if given.
fn client(server: &Server, ca: &std::path::Path, me: Option<&pki::Pair>) -> Client {
    let mut b = Client::builder()
        .server(&server.base)
        .ca_certificate_pem(std::fs::read(ca).unwrap());
    if let Some(pair) = me {
        b = b.identity_pem(identity(pair));
    }
    b.build().unwrap()
}

/// Creates `order` (from 1 by 100) on `server` over HTTPS, trusting `ca`,
/// presenting `me` if given.
async fn create_order(server: &Server, ca: &std::path::Path, me: Option<&pki::Pair>) {
    let root = reqwest::Certificate::from_pem(&std::fs::read(ca).unwrap()).unwrap();
    let mut admin = reqwest::Client::builder().add_root_certificate(root);
    if let Some(pair) = me {
        admin = admin.identity(reqwest::Identity::from_pem(&identity(pair)).unwrap());
    }
    let made = admin
        .build()
        .unwrap()
        .post(format!("{}/v1/sequences", server.base))
        .json(&serde_json::json!({"name": "order", "start": 1, "step": 100}))
        .send()
        .await
        .unwrap();
    assert_eq!(made.status().as_u16(), 201);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_over_https_from_a_server_its_ca_signed_and_none_from_another() {
    let ca = pki::Pki::new("seqd client test CA");
    let server = serving(&ca, false).await;
    create_order(&server, &ca.ca, None).await;

    let c = client(&server, &ca.ca, None);
    let first = c.next("order").await.unwrap();
    let batch = c.batch("order", 150).await.unwrap();
    assert_eq!(first, 1);
    assert_eq!(batch, (2..152).collect::<Vec<i64>>());
    c.close().await;

    // A CA that did not sign the server's certificate: no lease, and the
    // error says the server could not be reached, naming no secret.
    let other = pki::Pki::new("another CA");
    let refused = client(&server, &other.ca, None).next("order").await;
    assert!(
        matches!(refused, Err(Error::Unavailable { .. })),
        "{refused:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_is_presented_where_the_server_requires_one() {
    let ca = pki::Pki::new("seqd client test CA");
    let server = serving(&ca, true).await;
    let me = ca.client("me");
    create_order(&server, &ca.ca, Some(&me)).await;

    assert_eq!(
        client(&server, &ca.ca, Some(&me))
            .next("order")
            .await
            .unwrap(),
        1
    );
    // Without a certificate the handshake is refused: no lease.
    let without = client(&server, &ca.ca, None).next("order").await;
    assert!(
        matches!(without, Err(Error::Unavailable { .. })),
        "{without:?}"
    );
}

#[test]
fn an_identity_that_is_not_pem_is_a_configuration_error_naming_no_key() {
    let built = Client::builder()
        .server("https://localhost:1")
        .identity_pem(
            b"-----BEGIN PRIVATE KEY-----\nc2VjcmV0\n-----END PRIVATE KEY-----\n".to_vec(),
        )
        .build();
    match built {
        Err(Error::Config(m)) => assert!(!m.contains("c2VjcmV0"), "{m}"),
        other => panic!("{other:?}"),
    }
    let bad_ca = Client::builder()
        .server("https://localhost:1")
        .ca_certificate_pem(b"not a certificate".to_vec())
        .build();
    assert!(matches!(bad_ca, Err(Error::Config(_))), "{bad_ca:?}");
}
