//! The README's configuration table lists every flag of `seqd serve`, each with its
//! environment variable, where the flag has one its default, and its meaning, as the code
//! declares them (clap's definition of the command line): the meaning is the flag's help
//! text word for word, so `seqd serve --help` and the README cannot say two things. Hidden
//! flags are left out, as in `--help`.

use std::collections::BTreeMap;

use clap::CommandFactory;

/// The table's rows by flag: (env cell, default cell, meaning cell).
fn readme_rows() -> BTreeMap<String, (String, String, String)> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    readme
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split(" | ").collect();
            let flag = cells.first()?.strip_prefix("| `--")?.strip_suffix('`')?;
            Some((
                format!("--{flag}"),
                (
                    cells.get(1)?.to_string(),
                    cells.get(2)?.to_string(),
                    cells.get(3)?.strip_suffix(" |")?.to_string(),
                ),
            ))
        })
        .collect()
}

/// The flags of `seqd serve` that `--help` shows: each by its long name.
/// Hidden flags (for tests, such as --settings-refresh) are not documented.
fn documented_flags() -> Vec<(String, clap::Arg)> {
    let cli = seqd::config::Cli::command();
    let serve = cli.find_subcommand("serve").expect("seqd serve");
    serve
        .get_arguments()
        .filter(|arg| !arg.is_hide_set())
        .filter_map(|arg| {
            let long = arg.get_long()?;
            (long != "help" && long != "version").then(|| (format!("--{long}"), arg.clone()))
        })
        .collect()
}

#[test]
fn the_readme_configuration_table_lists_every_serve_flag_with_its_variable_and_default() {
    let rows = readme_rows();
    let mut wrong = Vec::new();
    let mut flags = 0;
    for (flag, arg) in documented_flags() {
        flags += 1;
        let Some((env_cell, default_cell, _)) = rows.get(&flag) else {
            wrong.push(format!("{flag}: no row"));
            continue;
        };
        if let Some(env) = arg.get_env() {
            let env = format!("`{}`", env.to_string_lossy());
            if !env_cell.contains(&env) {
                wrong.push(format!("{flag}: variable {env}, the table says {env_cell}"));
            }
        }
        for default in arg.get_default_values() {
            let default = format!("`{}`", default.to_string_lossy());
            if !default_cell.contains(&default) {
                wrong.push(format!(
                    "{flag}: default {default}, the table says {default_cell}"
                ));
            }
        }
    }
    assert!(flags > 20, "flags of seqd serve: {flags}");
    assert!(
        wrong.is_empty(),
        "README.md, Configuration:\n{}",
        wrong.join("\n")
    );
}

/// A meaning as the README writes it, read as the help writes it: a link
/// `[text](docs/...)` stands for its target, the first letter in lower case.
fn readme_meaning(cell: &str) -> String {
    let mut out = String::new();
    let mut rest = cell;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find("](").map(|i| open + i) else {
            break;
        };
        let Some(end) = rest[close..].find(')').map(|i| close + i) else {
            break;
        };
        out.push_str(&rest[..open]);
        out.push_str(&rest[close + 2..end]);
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    lower_first(&out)
}

/// A help text on one line (its paragraphs joined), the first letter in
/// lower case, without the final period.
fn help_meaning(help: &str) -> String {
    let joined = help.split_whitespace().collect::<Vec<_>>().join(" ");
    lower_first(joined.strip_suffix('.').unwrap_or(&joined))
}

fn lower_first(s: &str) -> String {
    let mut chars = s.chars();
    chars.next().map_or_else(String::new, |c| {
        c.to_lowercase().chain(chars).collect::<String>()
    })
}

#[test]
fn each_flag_means_in_the_readme_what_its_help_says() {
    let rows = readme_rows();
    let mut wrong = Vec::new();
    for (flag, arg) in documented_flags() {
        let Some((_, _, cell)) = rows.get(&flag) else {
            continue; // the other test names it
        };
        let help = arg
            .get_long_help()
            .or(arg.get_help())
            .map(|h| help_meaning(&h.to_string()))
            .unwrap_or_default();
        let readme = readme_meaning(cell);
        if help != readme {
            wrong.push(format!("{flag}\n  help:   {help}\n  README: {readme}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "README.md, Configuration, the meaning of each flag against its help:\n{}",
        wrong.join("\n")
    );
}
