//! Database URLs in logs: [`redact_url`] hides every password.

/// Returns `url` with any password replaced by `***`, for logs: the password of
/// the user-info part (`scheme://user:secret@host`) and the value of query
/// parameters that carry one (`password`, `pass`, `pwd`, `sslpassword`).
/// Everything else is kept as written.
///
/// A password may hold any character, `@ : / ? #` included (drivers accept
/// them unencoded), so it ends at the last `@` that is followed by something
/// shaped like a host. When an `@` in the query could also be that one, more
/// is hidden than needed, never less.
pub fn redact_url(url: &str) -> String {
    let Some(i) = url.find("://") else {
        return redact_query(url);
    };
    let (head, rest) = url.split_at(i + 3);
    match password_span(rest) {
        Some((user_end, at)) => format!(
            "{head}{}:***{}",
            &rest[..user_end],
            redact_query(&rest[at..])
        ),
        None => format!("{head}{}", redact_query(rest)),
    }
}

/// In what follows `scheme://`: where the user name ends (at its `:`) and
/// where the password ends (at its `@`), when there is a password.
fn password_span(rest: &str) -> Option<(usize, usize)> {
    let user_end = rest.find([':', '@', '/', '?', '#'])?;
    if !rest[user_end..].starts_with(':') {
        return None;
    }
    let at = rest
        .match_indices('@')
        .map(|(i, _)| i)
        .rfind(|&i| i > user_end && looks_like_host(&rest[i + 1..]))?;
    Some((user_end, at))
}

/// Whether `after` (what follows an `@`) starts with a host, an optional
/// port, then a path, a query, a fragment or the end.
fn looks_like_host(after: &str) -> bool {
    let host_end = after.find(['/', '?', '#']).unwrap_or(after.len());
    after[..host_end]
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b".-_[]:%,".contains(&b))
}

/// `s` with the values of password query parameters replaced by `***`.
fn redact_query(s: &str) -> String {
    // Split off the fragment and the query so that '@', ':' or '/' in them are
    // not mistaken for anything else.
    let (before_fragment, fragment) = s.split_at(s.find('#').unwrap_or(s.len()));
    let Some((base, query)) = before_fragment.split_once('?') else {
        return s.to_string();
    };
    let redacted: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, _))
                if ["password", "pass", "pwd", "sslpassword"]
                    .iter()
                    .any(|k| key.eq_ignore_ascii_case(k)) =>
            {
                format!("{key}=***")
            }
            _ => pair.to_string(),
        })
        .collect();
    format!("{base}?{}{fragment}", redacted.join("&"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_url_hides_the_password_of_the_user_info() {
        assert_eq!(
            redact_url("postgres://seqd:s3cret@db.example:5432/seqd"),
            "postgres://seqd:***@db.example:5432/seqd"
        );
        assert_eq!(
            redact_url("mysql://root:pw@127.0.0.1/test?ssl-mode=disabled"),
            "mysql://root:***@127.0.0.1/test?ssl-mode=disabled"
        );
    }

    #[test]
    fn redact_url_handles_at_and_colon_inside_the_password() {
        assert_eq!(
            redact_url("postgres://u:p@ss:w@rd@host/db"),
            "postgres://u:***@host/db"
        );
    }

    #[test]
    fn redact_url_hides_passwords_holding_slash_question_mark_or_hash() {
        for (url, shown) in [
            ("postgres://u:pa/ss@host/db", "postgres://u:***@host/db"),
            ("mysql://u:p?w#d@h:3306/db", "mysql://u:***@h:3306/db"),
            (
                "postgres://u:a#b?c/d@e@host:5432/db?sslmode=require",
                "postgres://u:***@host:5432/db?sslmode=require",
            ),
            (
                "mysql://root:/?#@[::1]:3306/test",
                "mysql://root:***@[::1]:3306/test",
            ),
            (
                "postgres://u:p/w@/db?host=/run/postgresql",
                "postgres://u:***@/db?host=/run/postgresql",
            ),
        ] {
            assert_eq!(redact_url(url), shown, "{url}");
        }
    }

    #[test]
    fn redact_url_hides_rather_than_shows_when_the_user_info_is_ambiguous() {
        // An '@' in the query of a URL with a port reads as a password's end:
        // more is hidden than needed, nothing is shown that should not be.
        let shown = redact_url("postgres://u:pw@host:5432/db?application_name=a@b");
        assert!(!shown.contains("pw"), "{shown}");
        assert!(shown.starts_with("postgres://u:***@"), "{shown}");
    }

    #[test]
    fn redact_url_hides_password_query_parameters() {
        assert_eq!(
            redact_url("postgres://u@host/db?user=x&password=secret&sslmode=require"),
            "postgres://u@host/db?user=x&password=***&sslmode=require"
        );
        assert_eq!(redact_url("mysql://h/db?PWD=x"), "mysql://h/db?PWD=***");
    }

    #[test]
    fn redact_url_keeps_urls_without_password_unchanged() {
        for url in [
            "postgres://postgres@127.0.0.1:5432/test",
            "postgres://127.0.0.1/test?options=-csearch_path%3Dx",
            "mysql://root@127.0.0.1:3306/test",
            "sqlite://seqd.db?mode=rwc",
            "sqlite::memory:",
            "sqlite:relative.db",
            "not a url",
            "",
        ] {
            assert_eq!(redact_url(url), url);
        }
    }

    #[test]
    fn redact_url_does_not_take_an_at_in_the_path_or_query_for_user_info() {
        assert_eq!(
            redact_url("sqlite:///tmp/a:b@c.db?mode=rwc"),
            "sqlite:///tmp/a:b@c.db?mode=rwc"
        );
        assert_eq!(
            redact_url("postgres://host/db?application_name=a:b@c"),
            "postgres://host/db?application_name=a:b@c"
        );
    }
}
