//! Runs every adapter of every agent in one process. The plan is checked first (which agent
//! serves what); then each adapter is made ([`make`], one line per kind), so that all of them
//! can fail their setup before any serves; then they serve until Ctrl-C / SIGTERM, or until
//! the terminal's session ends when an agent uses the terminal. An approval or a question
//! always goes back through the adapter that received the message: each adapter brings its
//! own counterpart.

use super::{Agent, App};
use crate::adapters::api::ApiConfig;
use crate::adapters::http::{HttpAdapter, HttpSettings};
use crate::adapters::slack::SlackAdapter;
use crate::adapters::telegram::TelegramAdapter;
use crate::adapters::terminal::TerminalAdapter;
use crate::adapters::{Adapter, Stop};
use crate::config::AdapterKind;
use anyhow::bail;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How long the adapters may take to end once their turns were stopped.
const STOPPED_GRACE: Duration = Duration::from_secs(5);

/// Serves every agent's adapters (`adapter` overrides what the config names) until Ctrl-C or
/// SIGTERM, or until the terminal session ends when an agent uses the terminal.
pub async fn serve(app: App, adapter: Option<AdapterKind>) -> anyhow::Result<()> {
    let app = Arc::new(app);
    let plan = plan(&app.agents, adapter)?;
    app.announce_pending();
    let reloader = super::reload::Reloader::new(&app);
    let mut turns = Turns(None);
    let mut adapters = Vec::with_capacity(plan.len());
    for (agent, kind) in &plan {
        adapters.push(make(agent, kind, &mut turns, &reloader).await?);
    }
    // Skills the start left to compile join while the adapters serve.
    tokio::spawn(app.clone().load_pending());
    tokio::spawn(reloader.clone().on_hangup());
    app.relisting();
    let (stop, stopping) = watch::channel(false);
    // After the adapters are made: a skill's first run can already reach them.
    let schedules = super::schedule::start(&app.agents, &stopping);
    let mut serving = tokio::task::JoinSet::new();
    let mut ending = None;
    for adapter in adapters {
        let (describe, ends) = (adapter.describe(), adapter.ends_the_process());
        let task = serving.spawn(run(adapter, describe, stopping.clone()));
        if ends {
            ending = Some(task.id());
        }
    }
    match ending {
        // The terminal session ends the process, as `chat` does; Ctrl-C there cancels a
        // turn rather than stopping the other adapters.
        Some(id) => {
            while let Some(done) = serving.join_next_with_id().await {
                let finished = match done {
                    Ok((finished, ())) => finished,
                    Err(e) => e.id(),
                };
                if finished == id {
                    break;
                }
            }
        }
        None => shutdown_signal().await,
    }
    // No new runs from now on; the turns running have `engine.session.drain_seconds` to
    // finish, then are stopped (each adapter records how its turn ended: the API stream's
    // failure event, the chat's message; a chat turn waiting on a written-down approval is
    // left to another replica).
    for agent in &app.agents {
        agent.engine.drain();
    }
    let _ = stop.send(true);
    let drain = Duration::from_secs(app.config.config.engine.session.drain_seconds);
    tracing::info!("stopping: no new runs; running turns have {} s to finish", drain.as_secs());
    schedules.wait().await;
    if tokio::time::timeout(drain, drained(&mut serving)).await.is_err() {
        tracing::warn!(
            "turns still running {} s after the stop (engine.session.drain_seconds) are stopped",
            drain.as_secs()
        );
        for agent in &app.agents {
            agent.engine.stop_turns();
        }
        if tokio::time::timeout(STOPPED_GRACE, drained(&mut serving)).await.is_err() {
            eprintln!("warning: open streams were cut {} s after their turns were stopped", STOPPED_GRACE.as_secs());
        }
    }
    retire(&app.broker).await;
    for agent in &app.agents {
        finish_background(&agent.engine).await;
    }
    Ok(())
}

async fn drained(serving: &mut tokio::task::JoinSet<()>) {
    while serving.join_next().await.is_some() {}
}

/// Tells the other replicas this one is gone: what waited here on a person reads
/// `cancelled`, and the chat turns left written down are resumed elsewhere at once rather
/// than once this replica's heartbeat is old.
async fn retire(broker: &crate::broker::Broker) {
    let why = match tokio::time::timeout(STOPPED_GRACE, broker.retire()).await {
        Ok(Ok(())) => return,
        Ok(Err(e)) => e.to_string(),
        Err(_) => format!("no answer within {} s", STOPPED_GRACE.as_secs()),
    };
    tracing::warn!("cannot tell the other replicas this one stops ({why}); they notice once its heartbeat is old");
}

/// Serves one adapter; an error is logged, and the others keep serving.
async fn run(adapter: Box<dyn Adapter>, describe: String, stop: Stop) {
    if let Err(e) = adapter.serve(stop).await {
        tracing::error!("{describe} stopped with an error: {e:#}");
    }
}

/// The adapter of `kind` for `agent`: one line per kind.
async fn make(
    agent: &Agent,
    kind: &Served,
    turns: &mut Turns,
    reloader: &Arc<super::reload::Reloader>,
) -> anyhow::Result<Box<dyn Adapter>> {
    Ok(match *kind {
        Served::Terminal => Box::new(TerminalAdapter::new(agent.engine.clone(), agent.name.clone())),
        Served::Api { port } => {
            let settings = HttpSettings {
                agent: agent.name.as_deref(),
                display_name: &agent.display_name,
                ui: &agent.ui,
                port,
                runs: agent.runs.clone(),
                mcp: agent.mcp.clone(),
                reload: Some(Arc::new(super::reload::AgentReload {
                    reloader: reloader.clone(),
                    agent: agent.name.clone(),
                })),
            };
            Box::new(HttpAdapter::bind(agent.engine.clone(), settings, turns.handle()?).await?)
        }
        Served::Slack => {
            let settings = agent.adapter.slack.as_ref().ok_or_else(|| anyhow::anyhow!("no adapter.slack block"))?;
            Box::new(SlackAdapter::new(
                agent.engine.clone(),
                settings,
                agent.name.as_deref(),
                &agent.outbox,
                &agent.runs,
            ))
        }
        Served::Telegram => {
            let settings =
                agent.adapter.telegram.as_ref().ok_or_else(|| anyhow::anyhow!("no adapter.telegram block"))?;
            Box::new(TelegramAdapter::new(
                agent.engine.clone(),
                settings,
                agent.name.as_deref(),
                &agent.outbox,
                &agent.runs,
            ))
        }
    })
}

/// The runtime the API servers' turns run on, beside the one that serves HTTP (see
/// [`Api::with_turns`]): as many workers as cores, like the serving runtime, which the OS
/// then shares between them. Shut down in the background when dropped (a runtime cannot
/// be dropped by a task of another one), after the servers drained. Started by the first
/// API server: a terminal-only run has none.
struct Turns(Option<tokio::runtime::Runtime>);

impl Turns {
    /// The runtime's handle, started on first use.
    fn handle(&mut self) -> anyhow::Result<tokio::runtime::Handle> {
        let runtime = match self.0.take() {
            Some(runtime) => runtime,
            None => tokio::runtime::Builder::new_multi_thread()
                .thread_name("skillhost-turns")
                .enable_all()
                .build()
                .map_err(|e| anyhow::anyhow!("cannot start the runtime for turns: {e}"))?,
        };
        Ok(self.0.insert(runtime).handle().clone())
    }
}

impl Drop for Turns {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// What one adapter of one agent serves, as the plan decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Served {
    /// The terminal (one agent at most).
    Terminal,
    /// The HTTP API and `/mcp`, on this port.
    Api { port: u16 },
    /// The agent's Slack app.
    Slack,
    /// The agent's Telegram bot.
    Telegram,
}

/// Which agent serves what, checked before anything listens.
fn plan(agents: &[Agent], adapter: Option<AdapterKind>) -> anyhow::Result<Vec<(&Agent, Served)>> {
    let mut plan = Vec::new();
    let mut terminal: Option<&Agent> = None;
    let mut ports: BTreeMap<u16, &str> = BTreeMap::new();
    let mut bots: BTreeMap<(&str, String), &str> = BTreeMap::new();
    let kinds = |agent: &Agent| adapter.map(|a| vec![a]).unwrap_or_else(|| agent.adapters.clone());
    // `SKILLHOST_UI_PORT` / `_TOKEN` (or the spec's `MITHAI_UI_*`) set the port and token of
    // the one agent serving the API; with several, each has its own `ui`, and a variable
    // that would replace them all (or apply to none) is refused by name.
    let serving_api = agents.iter().filter(|a| kinds(a).contains(&AdapterKind::Api)).count();
    if serving_api > 1
        && let Some(name) = ApiConfig::overriding_variable()
    {
        bail!(
            "{name} is set, but {serving_api} agents serve the API: it would replace every agent's own ui setting; \
             unset it and give each agent its own agents.<name>.ui.port and ui.auth_token"
        );
    }
    let single = serving_api == 1;
    for agent in agents {
        let label = agent.name.as_deref().unwrap_or("the agent");
        for kind in kinds(agent) {
            match kind {
                AdapterKind::Cli => {
                    if let Some(other) = terminal {
                        bail!(
                            "agents `{}` and `{label}` both use the cli adapter; only one agent can have the terminal",
                            other.name.as_deref().unwrap_or_default()
                        );
                    }
                    terminal = Some(agent);
                    plan.push((agent, Served::Terminal));
                }
                AdapterKind::Api => {
                    let port = ApiConfig::port(&agent.ui, single)?;
                    if let Some(other) = ports.insert(port, label) {
                        bail!(
                            "agents `{other}` and `{label}` both serve the API on port {port}: give each agent its own `ui.port` (agents.<name>.ui.port)"
                        );
                    }
                    plan.push((agent, Served::Api { port }));
                }
                AdapterKind::Slack | AdapterKind::Telegram => {
                    let (served, token) = match kind {
                        AdapterKind::Slack => {
                            (Served::Slack, agent.adapter.slack.as_ref().map(|s| s.app_token.clone()))
                        }
                        _ => (Served::Telegram, agent.adapter.telegram.as_ref().map(|t| t.bot_token.clone())),
                    };
                    agent.adapter.ready(kind).map_err(|e| anyhow::anyhow!("{label}: {e}"))?;
                    // One connection per bot: Slack spreads events over an app's sockets, and
                    // Telegram refuses a second poller.
                    let token = token.unwrap_or_default();
                    if let Some(other) = bots.insert((served_name(served), token), label) {
                        bail!(
                            "agents `{other}` and `{label}` use the same {} bot: give each agent its own adapter.{} block",
                            served_name(served),
                            served_name(served)
                        );
                    }
                    plan.push((agent, served));
                }
            }
        }
    }
    Ok(plan)
}

fn served_name(served: Served) -> &'static str {
    match served {
        Served::Slack => "slack",
        Served::Telegram => "telegram",
        Served::Terminal => "cli",
        Served::Api { .. } => "api",
    }
}

/// Lets the last turns' daily reflections reach the memory files before the process ends,
/// but never hangs the exit on a slow provider.
pub async fn finish_background(engine: &Arc<crate::engine::Engine>) {
    if tokio::time::timeout(Duration::from_secs(30), engine.wait_for_background()).await.is_err() {
        eprintln!("warning: a background reflection was still running and was dropped");
    }
}

/// Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                term.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
