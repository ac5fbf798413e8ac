//! A suite of cases run with the same assertions on each backend of a store (SQLite and
//! PostgreSQL for the state, a directory and PostgreSQL for memory): each case is given a
//! way to open the backend under test, as many times as it needs.

use futures::future::BoxFuture;
use std::time::Duration;

/// One case: its name, and its body given how to open the store under test.
pub type Case<Open> = (&'static str, fn(Open) -> BoxFuture<'static, ()>);

/// The named `async fn(open)` cases, as a slice of [`Case`]s.
macro_rules! cases {
    ($($case:ident),* $(,)?) => {
        &[$((stringify!($case), |open| Box::pin($case(open)))),*]
    };
}

/// Runs one case, naming it, failing it after a minute.
pub async fn run(name: &str, case: BoxFuture<'static, ()>) {
    println!("case {name}");
    match tokio::time::timeout(Duration::from_secs(60), case).await {
        Ok(()) => {}
        Err(_) => panic!("case {name} did not finish within a minute"),
    }
}
