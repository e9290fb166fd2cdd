//! `seqd import-tinyid`: a migration from Tinyid (docs/import-tinyid.md). It
//! reads Tinyid's `tiny_id_info` and `tiny_id_token` from every Tinyid
//! database given and writes one seqd sequence per `biz_type` and one client
//! token per Tinyid token.
//!
//! # Where each sequence continues
//!
//! Tinyid reserves a segment with `max_id = max_id + step` and hands out the
//! IDs of `(old max_id, max_id]` that are `remainder` modulo `delta`: every ID
//! a Tinyid database handed out is at most its row's `max_id`, whatever its
//! delta and remainder. With several Tinyid databases (each its own
//! remainder), the seqd sequence starts above the largest `max_id` of them
//! all: its `max_id` is that largest one, and it serves `max_id + 1` first.
//! The planning, the `--raise` of a sequence behind and the refusals are
//! those of `seqd import-leaf` ([`crate::leaf`]), on rows whose next ID is
//! `max_id + 1`.
//!
//! # Tokens
//!
//! A Tinyid token is a text checked as it is; seqd keeps only the SHA-256 of
//! a client token, so the text becomes a client token with its hash: a
//! Tinyid client keeps its `tinyid.token` unchanged. Its rows (one per biz
//! type, in any of the databases) become the token's prefixes, with the
//! right `draw`; its label is `tinyid-` and the first 12 hex digits of the
//! hash. seqd's scopes are prefixes, so the token also covers names that
//! begin with one of its biz types: the report names every such widening it
//! finds among the sequences imported. A token already in seqd (the same
//! hash) is left as it is; a label taken by another token is a conflict.
//!
//! Tokens are written only after the sequences were (not in a dry run, not
//! when the import is refused).

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{bail, Context};
use chrono::Utc;

use crate::config::ImportTinyidArgs;
use crate::domain::token::{Rights, Scope, TokenHash, TokenLabel, TokenRecord};
use crate::leaf::{self, query_all, ImportOptions, LeafRow, Source};
use crate::service::{Presented, ServiceError};
use crate::store::{self, TokenRow};

const INFO_PG: &str = "SELECT biz_type::text, max_id::bigint, step::bigint, delta::bigint, \
                       remainder::bigint FROM tiny_id_info ORDER BY biz_type";
const INFO_MYSQL: &str = "SELECT CAST(biz_type AS CHAR), CAST(max_id AS SIGNED), \
                          CAST(step AS SIGNED), CAST(delta AS SIGNED), CAST(remainder AS SIGNED) \
                          FROM tiny_id_info ORDER BY biz_type";
const TOKEN_PG: &str = "SELECT token::text, biz_type::text FROM tiny_id_token ORDER BY id";
const TOKEN_MYSQL: &str =
    "SELECT CAST(token AS CHAR), CAST(biz_type AS CHAR) FROM tiny_id_token ORDER BY id";

/// Tinyid's words in the report.
const TINYID: Source = Source {
    system: "Tinyid",
    table: "tiny_id_info",
    key: "biz type",
};

/// One row of `tiny_id_info`, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InfoRow {
    /// The business type: the seqd sequence's name.
    pub biz_type: String,
    /// The largest ID this database reserved (`None` if NULL).
    pub max_id: Option<i64>,
    /// Its segment size (`None` if NULL).
    pub step: Option<i64>,
    /// The increment between its IDs.
    pub delta: Option<i64>,
    /// Its IDs' remainder modulo `delta`.
    pub remainder: Option<i64>,
}

/// One row of `tiny_id_token`: a token and one biz type it may draw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenGrant {
    /// The token's text.
    pub token: String,
    /// A business type it covers.
    pub biz_type: String,
}

type RawInfo = (String, Option<i64>, Option<i64>, Option<i64>, Option<i64>);

/// Reads both tables of the Tinyid database at `url`.
pub async fn read(url: &str) -> Result<(Vec<InfoRow>, Vec<TokenGrant>), leaf::LeafError> {
    let info: Vec<RawInfo> = query_all(url, "tiny_id_info", INFO_PG, INFO_MYSQL).await?;
    let grants: Vec<(String, String)> =
        query_all(url, "tiny_id_token", TOKEN_PG, TOKEN_MYSQL).await?;
    Ok((
        info.into_iter()
            .map(|(biz_type, max_id, step, delta, remainder)| InfoRow {
                biz_type,
                max_id,
                step,
                delta,
                remainder,
            })
            .collect(),
        grants
            .into_iter()
            .map(|(token, biz_type)| TokenGrant { token, biz_type })
            .collect(),
    ))
}

/// One row per biz type over every database, in the terms of
/// [`leaf::import`]: the next ID is one above the largest `max_id` any
/// database reserved; the step is the largest; a NULL `max_id` or step in
/// any database makes the row invalid (reported, not guessed).
pub fn merge(databases: &[Vec<InfoRow>]) -> Vec<LeafRow> {
    let mut by_type: BTreeMap<&str, Vec<&InfoRow>> = BTreeMap::new();
    for row in databases.iter().flatten() {
        by_type.entry(row.biz_type.as_str()).or_default().push(row);
    }
    by_type
        .into_iter()
        .map(|(biz_type, rows)| {
            let all = |f: fn(&InfoRow) -> Option<i64>| -> Option<Vec<i64>> {
                rows.iter().map(|r| f(r)).collect()
            };
            let max_id = all(|r| r.max_id).and_then(|v| v.into_iter().max());
            let step = all(|r| r.step).and_then(|v| v.into_iter().max());
            let parts: Vec<String> = rows
                .iter()
                .map(|r| {
                    format!(
                        "delta {} remainder {}",
                        r.delta.unwrap_or(1),
                        r.remainder.unwrap_or(0)
                    )
                })
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            LeafRow {
                biz_tag: biz_type.to_owned(),
                // Tinyid's max_id is the last ID reserved: seqd's next is one above.
                max_id: max_id.map(|m| m.saturating_add(1)),
                step,
                description: Some(format!(
                    "imported from Tinyid ({} database(s): {})",
                    rows.len(),
                    parts.join(", ")
                )),
            }
        })
        .collect()
}

/// What the import does with one Tinyid token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenAction {
    /// Made a client token with this label and these prefixes.
    Import {
        /// Its label.
        label: String,
        /// Its prefixes (the biz types).
        prefixes: Vec<String>,
        /// Other imported names its prefixes cover too.
        widened: Vec<String>,
    },
    /// Already in seqd (the same hash), left as it is.
    Exists(String),
    /// Its label is taken by another token: the import of tokens is refused.
    Conflict(String),
    /// Not usable as a client token: why.
    Invalid(String),
    /// Writing it failed: why.
    Failed(String),
}

/// The tokens of every database, grouped by text, each with what to do;
/// `existing` holds seqd's token rows; `names` are the sequences imported.
pub fn plan_tokens(
    databases: &[Vec<TokenGrant>],
    existing: &[TokenRow],
    names: &[String],
) -> Vec<(TokenRecord, TokenAction)> {
    let mut by_token: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for g in databases.iter().flatten() {
        by_token
            .entry(g.token.as_str())
            .or_default()
            .insert(g.biz_type.as_str());
    }
    let now = Utc::now();
    let mut out = Vec::new();
    for (text, types) in by_token {
        let hash = TokenHash::of(text);
        let hex = hash.to_hex();
        let label_text = format!("tinyid-{}", &hex[..12]);
        let prefixes: Vec<&str> = types.iter().copied().collect();
        let made = TokenLabel::parse(&label_text)
            .map_err(|e| e.to_string())
            .and_then(|label| {
                let scope = Scope::parse(&prefixes).map_err(|e| e.to_string())?;
                Ok(TokenRecord {
                    label,
                    hash,
                    scope,
                    rights: Rights {
                        draw: true,
                        read: false,
                    },
                    created_at: now,
                    expires_at: None,
                    revoked_at: None,
                })
            });
        let record = match made {
            Ok(r) => r,
            Err(why) => {
                // The record is only for the report here: never written.
                out.push((
                    placeholder(now),
                    TokenAction::Invalid(format!("{label_text}: {why}")),
                ));
                continue;
            }
        };
        let action = if text.is_empty() {
            TokenAction::Invalid(format!("{label_text}: an empty token"))
        } else if existing.iter().any(|r| r.hash == hex) {
            TokenAction::Exists(label_text)
        } else if existing.iter().any(|r| r.label == label_text) {
            TokenAction::Conflict(format!(
                "{label_text}: the label is taken by another token; revoke or rename it"
            ))
        } else {
            let widened = names
                .iter()
                .filter(|n| !types.contains(n.as_str()) && types.iter().any(|t| n.starts_with(t)))
                .cloned()
                .collect();
            TokenAction::Import {
                label: label_text,
                prefixes: prefixes.iter().map(|p| (*p).to_owned()).collect(),
                widened,
            }
        };
        out.push((record, action));
    }
    out
}

fn placeholder(now: chrono::DateTime<Utc>) -> TokenRecord {
    TokenRecord {
        label: TokenLabel::parse("tinyid-invalid").expect("a valid label"),
        hash: TokenHash::of(""),
        scope: Scope::All,
        rights: Rights::default(),
        created_at: now,
        expires_at: None,
        revoked_at: None,
    }
}

fn describe_token(action: &TokenAction, dry_run: bool) -> String {
    match action {
        TokenAction::Import {
            label,
            prefixes,
            widened,
        } => {
            let mut s = format!(
                "{:<8} token {label:<23} draw on names beginning with {}",
                if dry_run { "import?" } else { "import" },
                prefixes.join(", ")
            );
            if !widened.is_empty() {
                s.push_str(&format!(
                    " (also covers {}: seqd's scopes are prefixes)",
                    widened.join(", ")
                ));
            }
            s
        }
        TokenAction::Exists(label) => format!("{:<8} token {label:<23} already in seqd", "skip"),
        TokenAction::Conflict(why) => format!("{:<8} token {why}", "CONFLICT"),
        TokenAction::Invalid(why) => format!("{:<8} token {why}", "invalid"),
        TokenAction::Failed(why) => format!("{:<8} token {why}", "failed"),
    }
}

/// `seqd import-tinyid`: reads every `--from` database, imports the
/// sequences as `import-leaf` does, then the tokens; exits non-zero on a
/// conflict, an invalid row (unless `--skip-invalid`) or a failed write.
pub async fn run(args: &ImportTinyidArgs) -> anyhow::Result<()> {
    let mut infos = Vec::new();
    let mut grants = Vec::new();
    for url in &args.from {
        let (info, tokens) = read(url).await?;
        println!(
            "read {} row(s) of tiny_id_info and {} of tiny_id_token from {}",
            info.len(),
            tokens.len(),
            store::redact_url(url)
        );
        infos.push(info);
        grants.push(tokens);
    }
    let rows = merge(&infos);
    let from = format!("{} Tinyid database(s)", args.from.len());
    let opts = ImportOptions {
        dry_run: args.dry_run,
        raise: args.raise,
        max_step: args.db.max_step,
    };
    let (report, mut problems) =
        leaf::import_and_report(&rows, &args.db, opts, args.skip_invalid, &TINYID, &from).await?;

    let options = store::StoreOptions::default().with_setup(&args.db.schema_setup());
    let store = store::connect(&args.db.url(), &options)
        .await
        .with_context(|| format!("connecting to {}", store::redact_url(&args.db.url())))?
        .sequences();
    let target = crate::cli::service_over(store, &args.db).admin(Presented::LOCAL)?;
    let existing = match target.token_rows().await {
        Ok(rows) => rows,
        Err(e) if opts.dry_run => {
            println!("note: seqd's token table cannot be read ({e}); every token is shown as new");
            Vec::new()
        }
        Err(e) => return Err(e).context("reading seqd's client tokens"),
    };
    let names: Vec<String> = rows.iter().map(|r| r.biz_tag.clone()).collect();
    let mut planned = plan_tokens(&grants, &existing, &names);
    let refused = planned
        .iter()
        .any(|(_, a)| matches!(a, TokenAction::Conflict(_)));
    let write = report.written() && !refused;
    if write {
        for (record, action) in &mut planned {
            if let TokenAction::Import { label, .. } = action {
                match target.import_token(record).await {
                    Ok(()) => {}
                    Err(ServiceError::TokenExists(_)) => {
                        *action = TokenAction::Exists(label.clone());
                    }
                    Err(e) => *action = TokenAction::Failed(format!("{label}: {e}")),
                }
            }
        }
    }
    for (_, action) in &planned {
        println!("{}", describe_token(action, !write));
    }
    let count = |f: fn(&TokenAction) -> bool| planned.iter().filter(|(_, a)| f(a)).count();
    println!(
        "tokens: {} {}, {} already in seqd, {} invalid, {} in conflict, {} failed",
        count(|a| matches!(a, TokenAction::Import { .. })),
        if write { "imported" } else { "to import" },
        count(|a| matches!(a, TokenAction::Exists(_))),
        count(|a| matches!(a, TokenAction::Invalid(_))),
        count(|a| matches!(a, TokenAction::Conflict(_))),
        count(|a| matches!(a, TokenAction::Failed(_))),
    );
    if refused {
        problems.push("a token's label is taken by another token (marked CONFLICT above); no token was written".into());
    }
    if count(|a| matches!(a, TokenAction::Failed(_))) > 0 {
        problems.push("some tokens failed to import".into());
    }
    if count(|a| matches!(a, TokenAction::Invalid(_))) > 0 && !args.skip_invalid {
        problems.push("some Tinyid tokens are not usable as client tokens (marked invalid above; --skip-invalid accepts this)".into());
    }
    if !problems.is_empty() {
        bail!("{}", problems.join("; "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(biz: &str, max_id: Option<i64>, step: Option<i64>) -> InfoRow {
        InfoRow {
            biz_type: biz.into(),
            max_id,
            step,
            delta: Some(2),
            remainder: Some(1),
        }
    }

    #[test]
    fn a_biz_type_continues_above_the_largest_max_id_of_every_database() {
        let merged = merge(&[
            vec![
                info("a", Some(4000), Some(100)),
                info("b", Some(7), Some(10)),
            ],
            vec![info("a", Some(5001), Some(300))],
        ]);
        let a = merged.iter().find(|r| r.biz_tag == "a").unwrap();
        assert_eq!((a.max_id, a.step), (Some(5002), Some(300)));
        assert!(a.description.as_deref().unwrap().contains("2 database(s)"));
        let b = merged.iter().find(|r| r.biz_tag == "b").unwrap();
        assert_eq!(b.max_id, Some(8));
    }

    #[test]
    fn a_null_in_any_database_is_not_guessed() {
        let merged = merge(&[
            vec![info("a", Some(4000), Some(100))],
            vec![info("a", None, Some(100))],
        ]);
        assert_eq!(merged[0].max_id, None);
    }

    #[test]
    fn tokens_group_by_text_and_existing_ones_are_kept() {
        let grants = vec![
            vec![
                TokenGrant {
                    token: "t1".into(),
                    biz_type: "x".into(),
                },
                TokenGrant {
                    token: "t1".into(),
                    biz_type: "y".into(),
                },
            ],
            vec![TokenGrant {
                token: "t1".into(),
                biz_type: "x".into(),
            }],
        ];
        let planned = plan_tokens(&grants, &[], &["x".into(), "y".into(), "x2".into()]);
        assert_eq!(planned.len(), 1);
        let (record, action) = &planned[0];
        assert_eq!(record.hash, TokenHash::of("t1"));
        match action {
            TokenAction::Import {
                prefixes, widened, ..
            } => {
                assert_eq!(prefixes, &["x", "y"]);
                assert_eq!(widened, &["x2"]);
            }
            other => panic!("{other:?}"),
        }
        let existing = [TokenRow::of(record)];
        let again = plan_tokens(&grants, &existing, &[]);
        assert!(matches!(again[0].1, TokenAction::Exists(_)));
    }
}
