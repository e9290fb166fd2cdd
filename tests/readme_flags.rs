//! The README's configuration table lists every flag of `seqd serve`, each with its
//! environment variable and, where the flag has one, its default, as the code declares
//! them (clap's definition of the command line). Hidden flags are left out, as in `--help`.

use std::collections::BTreeMap;

use clap::CommandFactory;

/// The table's rows by flag: (env cell, default cell).
fn readme_rows() -> BTreeMap<String, (String, String)> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    readme
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split(" | ").collect();
            let flag = cells.first()?.strip_prefix("| `--")?.strip_suffix('`')?;
            Some((
                format!("--{flag}"),
                (cells.get(1)?.to_string(), cells.get(2)?.to_string()),
            ))
        })
        .collect()
}

#[test]
fn the_readme_configuration_table_lists_every_serve_flag_with_its_variable_and_default() {
    let rows = readme_rows();
    let cli = seqd::config::Cli::command();
    let serve = cli.find_subcommand("serve").expect("seqd serve");
    let mut wrong = Vec::new();
    let mut flags = 0;
    for arg in serve.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        // Hidden flags (for tests, such as --settings-refresh) are not documented.
        if long == "help" || long == "version" || arg.is_hide_set() {
            continue;
        }
        flags += 1;
        let flag = format!("--{long}");
        let Some((env_cell, default_cell)) = rows.get(&flag) else {
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
