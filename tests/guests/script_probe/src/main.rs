//! A script tool (SKILL.md `tools:`) as a Rust program: `script_probe MODE ARG N`.
//!
//! - `argv`: prints its arguments (after the program's name) as a JSON array, and
//!   `argv done` to stderr;
//! - `fail`: writes `boom: ARG` to stderr and exits with code N;
//! - `read`: prints the file ARG (exit 2 with the error on stderr when it cannot);
//! - `write`: writes the file ARG (exit 2 with the error on stderr when it cannot);
//! - `loop`: never ends (the deadline ends it);
//! - `panic`: panics with ARG.

use std::io::Write;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    match arg(1).as_str() {
        "argv" => {
            println!("{}", json_array(&args[1..]));
            eprintln!("argv done");
        }
        "fail" => {
            eprintln!("boom: {}", arg(2));
            std::process::exit(arg(3).parse().unwrap_or(1));
        }
        "read" => match std::fs::read_to_string(arg(2)) {
            Ok(text) => print!("{text}"),
            Err(e) => exit_with(&format!("cannot read {}: {e}", arg(2))),
        },
        "write" => match std::fs::write(arg(2), "written by a script") {
            Ok(()) => println!("wrote {}", arg(2)),
            Err(e) => exit_with(&format!("cannot write {}: {e}", arg(2))),
        },
        "loop" => {
            let mut n: u64 = 0;
            loop {
                n = std::hint::black_box(n.wrapping_add(1));
            }
        }
        "panic" => panic!("{}", arg(2)),
        other => exit_with(&format!("unknown mode {other:?}")),
    }
    std::io::stdout().flush().unwrap();
}

fn exit_with(message: &str) -> ! {
    eprintln!("{message}");
    std::process::exit(2);
}

fn json_array(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", quoted.join(","))
}
