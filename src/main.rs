//! The `seqd` binary: parse flags, start logging, hand over to the library.

use clap::Parser;
use seqd::config::{Cli, Command};

/// mimalloc: every live sequence holds three blocks (its buffer, its name,
/// its map entry), which mimalloc's size classes pack with less waste than
/// glibc malloc (BENCHMARKS.md, "A million sequences").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // One readable line with the causes, never a backtrace (even under
            // RUST_BACKTRACE=1): these errors are for operators, not a bug report.
            eprintln!("error: {e:#}");
            exit_code(&e)
        }
    }
}

/// Exit status 2 for a configuration error of the schema (a migration
/// problem, docs/design.md "Tables and migrations") or of the TLS files, 1
/// for anything else.
fn exit_code(e: &anyhow::Error) -> std::process::ExitCode {
    use seqd::store::StoreError;
    let configuration = e.chain().any(|c| {
        matches!(
            c.downcast_ref::<StoreError>(),
            Some(StoreError::Migration(_))
        ) || c.is::<seqd::tls::TlsError>()
    });
    if configuration {
        std::process::ExitCode::from(2)
    } else {
        std::process::ExitCode::FAILURE
    }
}

async fn run() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match &cli.command {
        None => {
            seqd::telemetry::init(cli.serve.log_format);
            seqd::startup::serve(&cli.serve).await
        }
        Some(Command::Serve(args)) => {
            seqd::telemetry::init(args.log_format);
            seqd::startup::serve(args).await
        }
        Some(Command::Schema(args)) => {
            seqd::cli::schema(args);
            Ok(())
        }
        Some(Command::Migrate(db)) => tool(seqd::cli::migrate(db)).await,
        Some(Command::Sequences(cmd)) => tool(seqd::cli::sequences(cmd)).await,
        Some(Command::ImportLeaf(args)) => tool(seqd::leaf::run(args)).await,
        Some(Command::ImportTinyid(args)) => tool(seqd::tinyid_import::run(args)).await,
        Some(Command::Stripes(cmd)) => tool(seqd::stripes_cli::run(cmd)).await,
        Some(Command::Tokens(cmd)) => tool(seqd::tokens_cli::run(cmd)).await,
    }
}

/// Runs an operators' command (`command` has not started yet) with logging
/// in the default format.
async fn tool(
    command: impl std::future::Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<()> {
    seqd::telemetry::init(Default::default());
    command.await
}
