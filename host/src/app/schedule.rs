//! Skills that speak first: every skill with a `[schedule]` has its `scheduled` export called
//! at that interval while `skillhost run` serves, the sandboxed form of the polling loop a
//! Python skill starts in `startup`. Each run is an ordinary sandboxed call (a fresh
//! instance, the skill's limits, its grants); a skill's runs never overlap (a run that
//! outlasts the interval delays the next tick); a run that fails (an error, a trap, the
//! deadline) is logged with the skill's counts, and the next tick runs as usual. What a run
//! finds worth saying goes out through the `notify` import.

use super::Agent;
use crate::adapters::{Stop, stopped};
use crate::skills::Skill;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::MissedTickBehavior;
use tokio_util::task::TaskTracker;

/// Starts the schedules of every agent's skills, and of those that join later (skills that
/// finished compiling after the start); they end when `stop` is set. With the state in
/// PostgreSQL one replica runs an agent's schedules (elected by an advisory lock; the others
/// stand by and take over when its connection closes), so that a fleet sends each alert once.
pub fn start(agents: &[Agent], stop: &Stop) -> TaskTracker {
    let tasks = TaskTracker::new();
    for agent in agents {
        let (engine, name, stop) = (agent.engine.clone(), agent.name.clone(), stop.clone());
        match engine.history().state().postgres() {
            None => tasks.spawn(schedules(engine, name, stop)),
            Some(pg) => tasks.spawn(elected(pg, engine, name, stop)),
        };
    }
    tasks.close();
    tasks
}

/// Runs `engine`'s schedules while this replica holds the agent's role, until `stop`.
async fn elected(
    pg: Arc<crate::store::state::postgres::Postgres>,
    engine: Arc<crate::engine::Engine>,
    agent: Option<String>,
    stop: Stop,
) {
    let role = format!("schedules of agent {}", agent.as_deref().unwrap_or(""));
    let label = agent.as_deref().map(|a| format!(" of agent `{a}`")).unwrap_or_default();
    let plays = format!("runs the schedules{label}");
    while let Some(mut leadership) = pg.elect(&role, ("", &plays), stopped(stop.clone())).await {
        // The schedules stop with the process, or when the role is lost with its connection
        // (another replica then takes them).
        let (lost, held) = tokio::sync::watch::channel(false);
        let outer = stop.clone();
        let watch = tokio::spawn(async move {
            tokio::select! {
                () = leadership.lost() => tracing::warn!(
                    "the database connection that made this replica run the schedules was lost; standing again"
                ),
                () = stopped(outer) => {}
            }
            let _ = lost.send(true);
        });
        schedules(engine.clone(), agent.clone(), held).await;
        watch.abort();
        if *stop.borrow() {
            return;
        }
    }
}

/// Runs the schedules of `engine`'s skills, and of those that join later, until `stop`.
async fn schedules(engine: Arc<crate::engine::Engine>, agent: Option<String>, stop: Stop) {
    let tasks = TaskTracker::new();
    let mut changes = engine.skills_changed();
    let mut started = std::collections::BTreeSet::new();
    start_new(&engine.skills(), agent.as_deref(), &mut started, &tasks, &stop);
    loop {
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { break },
            () = stopped(stop.clone()) => break,
        }
        start_new(&engine.skills(), agent.as_deref(), &mut started, &tasks, &stop);
    }
    tasks.close();
    tasks.wait().await;
}

/// Starts the schedule of each skill of `set` with one that is not in `started` yet.
fn start_new(
    set: &crate::skills::SkillSet,
    agent: Option<&str>,
    started: &mut std::collections::BTreeSet<String>,
    tasks: &TaskTracker,
    stop: &Stop,
) {
    for skill in set.skills.values() {
        let Some(every) = skill.schedule else { continue };
        if !started.insert(skill.name.clone()) {
            continue;
        }
        let label = match agent {
            Some(agent) => format!("skill `{}` (agent `{agent}`)", skill.name),
            None => format!("skill `{}`", skill.name),
        };
        tracing::info!("{label}: scheduled every {}", crate::config::Interval(every));
        tasks.spawn(run(skill.clone(), every, label, stop.clone()));
    }
}

/// Runs one skill's schedule until `stop`.
async fn run(skill: Arc<Skill>, every: Duration, label: String, stop: Stop) {
    let Some((component, env)) = skill.component() else { return };
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let (mut runs, mut failures) = (0u64, 0u64);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            () = stopped(stop.clone()) => return,
        }
        runs += 1;
        let outcome = tokio::select! {
            outcome = component.scheduled(env, &skill.config) => outcome,
            () = stopped(stop.clone()) => return,
        };
        let failure = match outcome {
            None => return,
            Some(Ok(outcome)) => match outcome.value {
                Ok(()) => {
                    tracing::debug!(run = runs, took = ?outcome.elapsed, "{label}: scheduled run done");
                    continue;
                }
                Err(message) => format!("it returned an error: {message}"),
            },
            Some(Err(e)) => e.to_string(),
        };
        failures += 1;
        tracing::warn!(
            run = runs,
            failures,
            "{label}: scheduled run {runs} failed ({failures} of {runs} so far): {failure}"
        );
    }
}
