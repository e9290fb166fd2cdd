//! TLS to the database (docs/design.md, "TLS to the database").
//!
//! The driver reads the URL's parameters (PostgreSQL `sslmode`,
//! `sslrootcert`, `sslcert`, `sslkey`; MySQL/MariaDB `ssl-mode`, `ssl-ca`,
//! `ssl-cert`, `ssl-key`) and makes the handshake with rustls on ring,
//! trusting the system's CA store and the CA file the URL names. This file
//! adds what it leaves out:
//!
//! - the files the URL names are opened before connecting, so that a wrong
//!   path is reported with its parameter ([`check_files`]): the driver reads
//!   them only during the handshake and says no more than "No such file";
//! - a handshake that fails on a certificate is a configuration error that
//!   names the problem, never an outage ([`connect_failed`]): it stops the
//!   start, a stripe's included, where an outage of a stripe would not.
//!
//! libpq's own rules for `sslmode` and `sslrootcert` are in
//! `postgres/mod.rs`.

use std::borrow::Cow;

use rustls::{CertificateError, Error as TlsError};

use super::{unavailable, StoreError};

/// A URL without the query parameters of `keys` whose value is `value`,
/// and whether there were any (the URL is returned as it is when not).
pub(crate) fn without_param<'u>(url: &'u str, keys: &[&str], value: &str) -> (Cow<'u, str>, bool) {
    let Ok(mut parsed) = ::url::Url::parse(url) else {
        return (Cow::Borrowed(url), false);
    };
    let matches = |(k, v): &(Cow<str>, Cow<str>)| keys.contains(&k.as_ref()) && v == value;
    if !parsed.query_pairs().any(|pair| matches(&pair)) {
        return (Cow::Borrowed(url), false);
    }
    let kept: Vec<(String, String)> = parsed
        .query_pairs()
        .filter(|pair| !matches(pair))
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    parsed.set_query(None);
    if !kept.is_empty() {
        parsed.query_pairs_mut().extend_pairs(kept);
    }
    (Cow::Owned(parsed.into()), true)
}

/// Whether the URL has one of the query parameters `keys`.
pub(crate) fn has_param(url: &str, keys: &[&str]) -> bool {
    ::url::Url::parse(url).is_ok_and(|u| u.query_pairs().any(|(k, _)| keys.contains(&k.as_ref())))
}

/// Opens every file named by one of the query parameters `keys` (certificates
/// and keys; a value holding the PEM itself is not a file): a file that
/// cannot be read is a configuration error naming the parameter, the path
/// and why. A URL that does not parse is left to the driver to report.
pub(crate) fn check_files(url: &str, keys: &[&str]) -> Result<(), StoreError> {
    let Ok(parsed) = ::url::Url::parse(url) else {
        return Ok(());
    };
    for (key, value) in parsed.query_pairs() {
        if !keys.contains(&key.as_ref()) || value.trim_start().starts_with("-----BEGIN") {
            continue;
        }
        if let Err(e) = std::fs::File::open(value.as_ref()) {
            return Err(StoreError::Config(format!(
                "{key}={value}: the file cannot be read: {e}"
            )));
        }
    }
    Ok(())
}

/// Narrows an error of opening a connection: a failed TLS handshake is a
/// [`StoreError::Config`] that names the certificate problem (never the
/// URL, so never its password); anything else as [`unavailable`].
pub(crate) fn connect_failed(e: sqlx::Error) -> StoreError {
    match handshake_problem(&e) {
        Some(problem) => StoreError::Config(format!("TLS to the database failed: {problem}")),
        None => unavailable(e),
    }
}

/// What went wrong in the TLS handshake, if `e` is a TLS failure: rustls's
/// error comes as the driver's TLS error or inside an I/O error of the
/// handshake.
fn handshake_problem(e: &sqlx::Error) -> Option<String> {
    match e {
        sqlx::Error::Tls(inner) => Some(match inner.downcast_ref::<TlsError>() {
            Some(tls) => describe(tls),
            None => inner.to_string(),
        }),
        sqlx::Error::Io(io) => io.get_ref()?.downcast_ref::<TlsError>().map(describe),
        _ => None,
    }
}

/// A rustls error in words an operator acts on.
fn describe(e: &TlsError) -> String {
    match e {
        TlsError::InvalidCertificate(cert) => {
            format!("the server's certificate is refused: {}", certificate(cert))
        }
        TlsError::AlertReceived(alert) => format!(
            "the server ended the handshake with the alert {alert:?} \
             (did it refuse the client certificate of sslcert / ssl-cert?)"
        ),
        other => format!("the handshake failed: {other}"),
    }
}

/// The certificate problem: its name, why it arises, rustls's detail.
fn certificate(e: &CertificateError) -> String {
    use CertificateError as C;
    let problem = match e {
        C::UnknownIssuer => {
            "unknown issuer (no CA of sslrootcert / ssl-ca, nor of the system's CA store, \
             signed it)"
        }
        C::NotValidForName | C::NotValidForNameContext { .. } => {
            "name mismatch (it is not for the host of the URL)"
        }
        C::Expired | C::ExpiredContext { .. } => "expired",
        C::NotValidYet | C::NotValidYetContext { .. } => "not valid yet",
        C::Revoked => "revoked",
        C::BadSignature => "bad signature",
        _ => "invalid",
    };
    format!("{problem}: {e}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_param_drops_only_the_named_value() {
        let (url, found) = without_param(
            "postgres://u:p@h/db?sslmode=verify-full&sslrootcert=system&application_name=a",
            &["sslrootcert"],
            "system",
        );
        assert!(found);
        assert_eq!(
            url,
            "postgres://u:p@h/db?sslmode=verify-full&application_name=a"
        );
        let (url, found) = without_param(
            "postgres://h/db?sslrootcert=system",
            &["sslrootcert"],
            "system",
        );
        assert!(found);
        assert_eq!(url, "postgres://h/db");
        let same = "postgres://h/db?sslrootcert=/ca.pem";
        assert_eq!(
            without_param(same, &["sslrootcert"], "system"),
            (Cow::Borrowed(same), false)
        );
    }

    #[test]
    fn check_files_names_the_parameter_and_the_path_of_a_missing_file() {
        let url = "mysql://h/db?ssl-mode=VERIFY_CA&ssl-ca=/nonexistent/ca.pem";
        match check_files(url, &["ssl-ca"]) {
            Err(StoreError::Config(m)) => {
                assert!(
                    m.starts_with("ssl-ca=/nonexistent/ca.pem: the file cannot be read"),
                    "{m}"
                )
            }
            other => panic!("{other:?}"),
        }
        assert!(check_files(url, &["ssl-cert"]).is_ok());
    }

    #[test]
    fn a_refused_certificate_is_a_configuration_error_naming_the_problem() {
        let io = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            TlsError::InvalidCertificate(CertificateError::UnknownIssuer),
        );
        match connect_failed(sqlx::Error::Io(io)) {
            StoreError::Config(m) => assert!(m.contains("unknown issuer"), "{m}"),
            other => panic!("{other:?}"),
        }
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert!(matches!(
            connect_failed(sqlx::Error::Io(refused)),
            StoreError::Unavailable(_)
        ));
    }
}
