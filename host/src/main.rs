//! The `skillhost` command.

mod cli;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args = cli::Args::parse();
    // Before the runtime: the trace exporter's blocking client must not start inside it.
    let telemetry = cli::init_logging(args.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let code = runtime.block_on(cli::run(args));
    telemetry.shutdown();
    code
}
