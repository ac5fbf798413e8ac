//! The `skillhost` command.

mod cli;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args = cli::Args::parse();
    // Before the runtime: the trace exporter's blocking client must not start inside it.
    // The config's `telemetry` block, read early (the command loads the config again, and
    // reports its problems); a config that does not load turns nothing on.
    let config = args.config.as_deref();
    let traces = skillhost::app::load_config(config).map(|c| c.config.telemetry).unwrap_or_default();
    let telemetry = cli::init_logging(args.verbose, &traces);
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
