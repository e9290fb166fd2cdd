//! `seqd tokens create|list|revoke`: the operators' door to the client
//! tokens (docs/api.md, "Client tokens"); the work is the service's
//! (`service/tokens.rs`), run directly on the database.

use anyhow::anyhow;

use crate::cli::admin;
use crate::config::TokensCommand;
use crate::service::tokens::{NewToken, TokenView};
use crate::service::ServiceError;

/// Runs one `seqd tokens` command.
pub async fn run(cmd: &TokensCommand) -> anyhow::Result<()> {
    match cmd {
        TokensCommand::Create {
            label,
            prefixes,
            can,
            expires,
            db,
        } => {
            let req = NewToken {
                label: label.clone(),
                prefixes: prefixes.clone(),
                rights: can.split(',').map(|r| r.trim().to_owned()).collect(),
                expires_in: expires.clone(),
            };
            let made = admin(db).await?.create_token(req).await.map_err(door)?;
            let view = TokenView::of(&made.record, chrono::Utc::now());
            eprintln!(
                "token '{}' made: {} on {}{}; it is shown this once, keep it now",
                view.label,
                view.rights.join(","),
                view.prefixes.join(" "),
                view.expires_at
                    .map(|e| format!(", until {}", e.to_rfc3339()))
                    .unwrap_or_default()
            );
            println!("{}", made.token.expose());
        }
        TokensCommand::List { db } => {
            let tokens = admin(db).await?.tokens().await.map_err(door)?;
            // Each column as wide as its widest cell (a label has up to 64
            // characters); the expiry to the second, in UTC.
            let rows: Vec<[String; 5]> = tokens
                .into_iter()
                .map(|t| {
                    [
                        t.label,
                        t.rights.join(","),
                        t.state,
                        t.expires_at.map_or_else(
                            || "-".into(),
                            |e| e.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                        ),
                        t.prefixes.join(" "),
                    ]
                })
                .collect();
            let header = ["LABEL", "RIGHTS", "STATE", "EXPIRES", "PREFIXES"].map(String::from);
            let mut widths = [0; 4];
            for row in std::iter::once(&header).chain(&rows) {
                for (w, cell) in widths.iter_mut().zip(row) {
                    *w = (*w).max(cell.chars().count());
                }
            }
            for [label, rights, state, expires, prefixes] in std::iter::once(header).chain(rows) {
                let [a, b, c, d] = widths;
                println!("{label:<a$} {rights:<b$} {state:<c$} {expires:<d$} {prefixes}");
            }
        }
        TokensCommand::Revoke { label, db } => {
            let revoked = admin(db).await?.revoke_token(label).await.map_err(door)?;
            if revoked {
                println!(
                    "token '{label}' revoked: refused within 5 s by every instance that can read \
                     the token table (one that cannot keeps drawing with it until it can)"
                );
            } else {
                println!("token '{label}' was revoked already");
            }
        }
    }
    Ok(())
}

/// The CLI's words for a token command's failure.
fn door(e: ServiceError) -> anyhow::Error {
    match e {
        ServiceError::Unavailable | ServiceError::Unreachable => {
            anyhow!("the database is unreachable or too slow; nothing changed")
        }
        e => anyhow::Error::new(e),
    }
}
