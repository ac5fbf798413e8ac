//! The person broker's rules, with the same assertions on both of its backends: in this
//! process (over a SQLite state directory, which keeps the record) and in the shared
//! PostgreSQL rows (a throwaway cluster, Debian's PostgreSQL 15). Each case gets a fresh
//! store and opens brokers on it as a process would ([`Broker::start`]); what only replicas
//! can show (a decision taken on another one, a turn resumed elsewhere) is in
//! `replicas.rs`, through the binary.

#[macro_use]
mod suite;

use serde_json::json;
use skillhost::broker::{
    Broker, DecideError, Decision, Entry, Kind, Opening, Outcome, Scope, TaskStatus, TaskStep, Ticket, Who,
};
use skillhost::store::state::StateStore;
use skillhost::store::state::postgres::{Postgres, Settings};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use suite::{Case, run};

/// Opens the case's store once more, as a new process would.
type Open = Arc<dyn Fn() -> StateStore + Send + Sync>;

const CASES: &[Case<Open>] = cases![
    first_decision_wins_the_same_repeats_a_different_one_conflicts,
    an_edit_and_a_reason_are_kept_and_repeat_only_as_given,
    another_agent_surface_person_or_conversation_finds_nothing,
    a_confirm_level_approval_waits_for_its_challenge,
    a_run_ending_cancels_its_own_entries_and_the_clock_times_out_the_rest,
    a_dropped_wait_cancels_its_entry,
    a_question_is_answered_by_its_schema_and_found_in_its_conversation,
    task_answers_are_taken_once_per_pending_key_and_a_cancel_is_final,
    every_entry_is_on_the_record,
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_process() {
    for (name, case) in CASES {
        let dir = Arc::new(tempfile::tempdir().unwrap());
        let open: Open = Arc::new(move || StateStore::new(dir.path()));
        assert!(!broker(&open()).durable());
        run(name, case(open)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres() {
    let pg = skillhost_tests::postgres::Postgres::start();
    for (i, (name, case)) in CASES.iter().enumerate() {
        let db = format!("case{i}");
        pg.psql("postgres", &format!("CREATE DATABASE {db}"));
        let url = format!("{}?sslmode=disable", pg.url("postgres", &db));
        let open: Open = Arc::new(move || {
            let config = skillhost::config::PostgresState { url: Some(url.clone()), ..Default::default() };
            let settings = Settings::from_config(Some(&config), |_| None).unwrap();
            StateStore::on_postgres(Postgres::connect(settings).unwrap())
        });
        assert!(broker(&open()).durable());
        run(name, case(open)).await;
    }
}

/// A broker on `state`, keeping its record for good.
fn broker(state: &StateStore) -> Arc<Broker> {
    Broker::start(state, None)
}

const AGENT: &str = "a";

/// The agent's operator (its API token), named `oncall`.
const OPERATOR: Who<'static> =
    Who { agent: AGENT, surface: None, user: "api", conversation: None, token: Some("oncall") };

/// An approval of run `run` asked on the API, waiting `secs`.
fn approval(run: &str, secs: u64) -> Opening {
    Opening {
        kind: Kind::Approval,
        scope: Scope::new(AGENT, "api", "c", run),
        expires_at: SystemTime::now() + Duration::from_secs(secs),
        challenge: None,
        prompt: None,
        choices: Vec::new(),
        presentation: json!({"tool": "files__delete", "arguments": {"path": "a"}}),
        resumable: None,
        watch: None,
    }
}

async fn open(broker: &Arc<Broker>, opening: Opening) -> Ticket {
    broker.open(opening).await.expect("opened")
}

async fn decide(broker: &Broker, id: &str, who: Who<'_>, decision: Decision) -> Result<(Entry, bool), DecideError> {
    broker.decide(id, who, decision).await
}

async fn outcome_of(broker: &Broker, id: &str, kind: Kind) -> Option<String> {
    broker.get(id, kind, OPERATOR).await.unwrap().expect("readable").outcome
}

async fn first_decision_wins_the_same_repeats_a_different_one_conflicts(open_store: Open) {
    let broker = broker(&open_store());
    let ticket = open(&broker, approval("r", 60)).await;
    let id = ticket.id().to_owned();
    assert_eq!(broker.waiting(Kind::Approval, OPERATOR).await.unwrap().len(), 1);
    let (won, settled) = decide(&broker, &id, OPERATOR, Decision::Approve(None)).await.unwrap();
    assert!(settled);
    assert_eq!((won.decided_by.as_deref(), won.decided_token.as_deref()), (Some("api"), Some("oncall")));
    assert_eq!(ticket.wait().await, Outcome::Approved(None), "the waiting turn is told");
    let (_, settled) = decide(&broker, &id, OPERATOR, Decision::Approve(None)).await.unwrap();
    assert!(!settled, "the same decision again succeeds and settles nothing");
    let conflict = decide(&broker, &id, OPERATOR, Decision::Deny(None)).await.unwrap_err();
    assert!(matches!(conflict, DecideError::Conflict(_)), "{conflict:?}");
    let unknown = decide(&broker, "no-such-id", OPERATOR, Decision::Approve(None)).await.unwrap_err();
    assert!(matches!(unknown, DecideError::Gone), "{unknown:?}");
    assert!(broker.get(&id, Kind::Question, OPERATOR).await.unwrap().is_none(), "ids are per kind");
    assert!(broker.waiting(Kind::Approval, OPERATOR).await.unwrap().is_empty());
    let of_run = broker.of_run("r", OPERATOR).await.unwrap();
    assert_eq!(of_run.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), [id.as_str()]);

    // Of concurrent decisions, exactly one settles the entry.
    let ticket = open(&broker, approval("r2", 60)).await;
    let id = ticket.id().to_owned();
    let racers = (0..8).map(|i| {
        let (broker, id) = (broker.clone(), id.clone());
        let decision = if i % 2 == 0 { Decision::Approve(None) } else { Decision::Deny(None) };
        tokio::spawn(async move { decide(&broker, &id, OPERATOR, decision).await })
    });
    let results = futures::future::join_all(racers).await;
    let settled = results.iter().filter(|r| matches!(r.as_ref().unwrap(), Ok((_, true)))).count();
    assert_eq!(settled, 1, "{results:?}");
    assert!(ticket.wait().await.by_person());
}

async fn an_edit_and_a_reason_are_kept_and_repeat_only_as_given(open_store: Open) {
    let broker = broker(&open_store());
    let ticket = open(&broker, approval("r", 60)).await;
    let id = ticket.id().to_owned();
    let edit = || Decision::Edit { arguments: r#"{"path":"b"}"#.into(), confirmation: None };
    let (won, _) = decide(&broker, &id, OPERATOR, edit()).await.unwrap();
    assert_eq!((won.outcome.as_deref(), won.answer.as_deref()), (Some("approved"), Some(r#"{"path":"b"}"#)));
    assert_eq!(ticket.wait().await, Outcome::Approved(Some(r#"{"path":"b"}"#.into())));
    assert!(!decide(&broker, &id, OPERATOR, edit()).await.unwrap().1, "the same edit repeats");
    let plain = decide(&broker, &id, OPERATOR, Decision::Approve(None)).await.unwrap_err();
    assert!(matches!(plain, DecideError::Conflict(_)), "not that edit: {plain:?}");

    let ticket = open(&broker, approval("r", 60)).await;
    let id = ticket.id().to_owned();
    decide(&broker, &id, OPERATOR, Decision::Deny(Some("not now".into()))).await.unwrap();
    assert_eq!(ticket.wait().await, Outcome::Denied(Some("not now".into())), "the reason reaches the turn");
    let read = broker.get(&id, Kind::Approval, OPERATOR).await.unwrap().unwrap();
    assert_eq!(Outcome::of(&read), Some(Outcome::Denied(Some("not now".into()))));
}

async fn another_agent_surface_person_or_conversation_finds_nothing(open_store: Open) {
    let broker = broker(&open_store());
    let chat = Opening {
        scope: Scope { deciders: vec!["U1".into()], ..Scope::new(AGENT, "slack:b1", "slack b1 C1/1.0", "r") },
        ..approval("r", 60)
    };
    let ticket = open(&broker, chat).await;
    let id = ticket.id().to_owned();
    let person =
        |surface, user, conversation| Who { agent: AGENT, surface: Some(surface), user, conversation, token: None };
    for who in [
        Who { agent: "b", ..OPERATOR },
        person("slack:b2", "U1", None),
        person("slack:b1", "U2", None),
        Who { agent: "b", ..person("slack:b1", "U1", None) },
        // Its approver, but from another channel of the bot, or one whose id the entry's
        // begins with.
        person("slack:b1", "U1", Some("slack b1 C2")),
        person("slack:b1", "U1", Some("slack b1 C")),
    ] {
        let refused = decide(&broker, &id, who, Decision::Approve(None)).await.unwrap_err();
        assert!(matches!(refused, DecideError::Gone), "{who:?} may not decide it: {refused:?}");
        assert!(broker.get(&id, Kind::Approval, who).await.unwrap().is_none(), "{who:?} does not see it");
    }
    assert_eq!(outcome_of(&broker, &id, Kind::Approval).await, None, "nothing changed");
    // Its approver, in the conversation (a thread of it) where it was shown.
    let (won, _) =
        decide(&broker, &id, person("slack:b1", "U1", Some("slack b1 C1")), Decision::Approve(None)).await.unwrap();
    assert_eq!(won.decided_by.as_deref(), Some("U1"));
    drop(ticket);

    // The agent's operator (the console) may decide a chat entry, and is recorded so.
    let chat = Opening { scope: Scope::new(AGENT, "telegram:b1", "telegram b1 42", "r"), ..approval("r", 60) };
    let ticket = open(&broker, chat).await;
    let (won, _) = decide(&broker, ticket.id(), OPERATOR, Decision::Deny(None)).await.unwrap();
    assert_eq!(won.decided_by.as_deref(), Some("console"));

    // An MCP approval is decided only by the client's retry, never by the operator.
    let mcp = Opening { scope: Scope::new(AGENT, "mcp", "mcp", "r"), ..approval("r", 60) };
    let posted = broker.post(mcp).await.unwrap();
    let refused = decide(&broker, &posted.id, OPERATOR, Decision::Approve(None)).await.unwrap_err();
    assert!(matches!(refused, DecideError::Gone), "{refused:?}");
    assert!(broker.get(&posted.id, Kind::Approval, OPERATOR).await.unwrap().is_some(), "but sees it");
    let client = Who { agent: AGENT, surface: Some("mcp"), user: "client", conversation: None, token: None };
    decide(&broker, &posted.id, client, Decision::Approve(None)).await.unwrap();
}

async fn a_confirm_level_approval_waits_for_its_challenge(open_store: Open) {
    let broker = broker(&open_store());
    let ticket = open(&broker, Opening { challenge: Some("CONFIRM".into()), ..approval("r", 60) }).await;
    let id = ticket.id().to_owned();
    for typed in [None, Some("nope")] {
        let refused = decide(&broker, &id, OPERATOR, Decision::Approve(typed.map(Into::into))).await.unwrap_err();
        assert!(matches!(refused, DecideError::Unconfirmed), "{refused:?}");
    }
    let edit = Decision::Edit { arguments: "{}".into(), confirmation: None };
    assert!(matches!(decide(&broker, &id, OPERATOR, edit).await.unwrap_err(), DecideError::Unconfirmed));
    assert_eq!(outcome_of(&broker, &id, Kind::Approval).await, None, "still pending");
    decide(&broker, &id, OPERATOR, Decision::Approve(Some(" CONFIRM ".into()))).await.unwrap();
    assert_eq!(ticket.wait().await, Outcome::Approved(None));

    let ticket = open(&broker, Opening { challenge: Some("CONFIRM".into()), ..approval("r", 60) }).await;
    decide(&broker, ticket.id(), OPERATOR, Decision::Deny(None)).await.expect("a denial needs no challenge");
}

async fn a_run_ending_cancels_its_own_entries_and_the_clock_times_out_the_rest(open_store: Open) {
    let broker = broker(&open_store());
    let decided = open(&broker, approval("r1", 60)).await;
    let pending = open(&broker, approval("r1", 60)).await;
    let other = open(&broker, approval("r2", 60)).await;
    let late = open(&broker, approval("r3", 1)).await;
    let ids: Vec<String> = [&decided, &pending, &other, &late].iter().map(|t| t.id().to_owned()).collect();
    decide(&broker, &ids[0], OPERATOR, Decision::Approve(None)).await.unwrap();
    broker.cancel_run("r1");
    let cancelled = until(|| async { outcome_of(&broker, &ids[1], Kind::Approval).await.is_some() }).await;
    assert!(cancelled, "the run's pending entry ends");
    assert_eq!(outcome_of(&broker, &ids[1], Kind::Approval).await.as_deref(), Some("cancelled"));
    assert_eq!(outcome_of(&broker, &ids[0], Kind::Approval).await.as_deref(), Some("approved"), "kept");
    assert_eq!(outcome_of(&broker, &ids[2], Kind::Approval).await, None, "another run's stays");
    drop(pending);
    // Nobody decides in time: the wait ends timed out, and a late decision finds nothing.
    assert_eq!(late.wait().await, Outcome::TimedOut);
    let refused = decide(&broker, &ids[3], OPERATOR, Decision::Approve(None)).await.unwrap_err();
    assert!(matches!(refused, DecideError::Gone), "{refused:?}");
    assert_eq!(outcome_of(&broker, &ids[3], Kind::Approval).await.as_deref(), Some("timed_out"));
    let waiting = broker.waiting(Kind::Approval, OPERATOR).await.unwrap();
    assert_eq!(waiting.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), [ids[2].as_str()]);
    assert!(broker.waiting(Kind::Approval, Who { agent: "b", ..OPERATOR }).await.unwrap().is_empty());
    drop((decided, other));
}

async fn a_dropped_wait_cancels_its_entry(open_store: Open) {
    let broker = broker(&open_store());
    let ticket = open(&broker, approval("r", 60)).await;
    let id = ticket.id().to_owned();
    drop(ticket);
    assert!(until(|| async { outcome_of(&broker, &id, Kind::Approval).await.is_some() }).await);
    assert_eq!(outcome_of(&broker, &id, Kind::Approval).await.as_deref(), Some("cancelled"));
    let refused = decide(&broker, &id, OPERATOR, Decision::Approve(None)).await.unwrap_err();
    assert!(matches!(refused, DecideError::Gone), "{refused:?}");
}

async fn a_question_is_answered_by_its_schema_and_found_in_its_conversation(open_store: Open) {
    let broker = broker(&open_store());
    let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
    let question = Opening {
        kind: Kind::Question,
        prompt: Some("how many?".into()),
        choices: vec!["1".into(), "2".into()],
        presentation: json!({"question": "how many?", "schema": schema}),
        scope: Scope::new(AGENT, "telegram:b1", "telegram b1 42", "r"),
        ..approval("r", 60)
    };
    let ticket = open(&broker, question).await;
    let id = ticket.id().to_owned();
    let person = Who { agent: AGENT, surface: Some("telegram:b1"), user: "7", conversation: None, token: None };
    assert_eq!(broker.question_in("telegram b1 42", person).await.as_deref(), Some(id.as_str()));
    assert_eq!(broker.question_in("telegram b1 43", person).await, None, "another conversation has none");
    let wrong = decide(&broker, &id, person, Decision::Answer(r#"{"n": "many"}"#.into())).await.unwrap_err();
    assert!(matches!(wrong, DecideError::Invalid(_)), "{wrong:?}");
    assert_eq!(outcome_of(&broker, &id, Kind::Question).await, None, "the question stays open");
    let approve = decide(&broker, &id, person, Decision::Approve(None)).await.unwrap_err();
    assert!(matches!(approve, DecideError::Gone), "a question is not approved: {approve:?}");
    decide(&broker, &id, person, Decision::Answer(r#"{"n": 2}"#.into())).await.unwrap();
    let Outcome::Answered(answer) = ticket.wait().await else { panic!("answered") };
    assert_eq!(serde_json::from_str::<serde_json::Value>(&answer).unwrap(), json!({"n": 2}));
    assert_eq!(broker.question_in("telegram b1 42", person).await, None, "answered: none waits");
}

async fn task_answers_are_taken_once_per_pending_key_and_a_cancel_is_final(open_store: Open) {
    let broker = broker(&open_store());
    let (task, wake) = broker.task_create(AGENT, "t", Duration::from_secs(60)).await.unwrap();
    assert_eq!(task.status, TaskStatus::Working);
    assert!(broker.task("nope", AGENT).await.unwrap().is_none());
    assert!(broker.task(&task.id, "other-agent").await.unwrap().is_none(), "another agent's task is unknown");
    let asked = json!({"x": {"method": "elicitation/create"}, "y": {"method": "elicitation/create"}});
    assert!(broker.task_set(&task.id, TaskStep::Asks(&asked)).await.unwrap());
    // One key answered (and a stray one ignored): the other still pending; the runner is woken.
    let woken = wake.changed(Duration::from_secs(30));
    let given = json!({"x": 1, "stray": 2});
    let answered = broker.task_answer(&task.id, AGENT, &given);
    let (_, answered) = tokio::join!(woken, answered);
    assert!(answered.unwrap());
    assert_eq!(broker.task_take_answers(&task.id).await.unwrap(), None);
    let pending = broker.task(&task.id, AGENT).await.unwrap().unwrap().requests.unwrap();
    assert_eq!(pending, json!({"y": {"method": "elicitation/create"}}));
    // A second answer to `x` is not taken.
    assert!(broker.task_answer(&task.id, AGENT, &json!({"x": 9, "y": 3})).await.unwrap());
    assert_eq!(broker.task_take_answers(&task.id).await.unwrap(), Some(json!({"x": 1, "y": 3})));
    assert_eq!(broker.task(&task.id, AGENT).await.unwrap().unwrap().status, TaskStatus::Working);
    // Cancelled: final; the runner's word no longer changes it; cancelling again is fine.
    assert!(broker.task_cancel(&task.id, AGENT).await.unwrap());
    assert!(!broker.task_set(&task.id, TaskStep::Ended(TaskStatus::Completed, "{}")).await.unwrap());
    assert!(broker.task_cancel(&task.id, AGENT).await.unwrap());
    assert_eq!(broker.task(&task.id, AGENT).await.unwrap().unwrap().status, TaskStatus::Cancelled);
    assert!(!broker.task_cancel("nope", AGENT).await.unwrap());
    assert!(!broker.task_answer("nope", AGENT, &json!({})).await.unwrap());
}

async fn every_entry_is_on_the_record(open_store: Open) {
    let broker = broker(&open_store());
    let decided = open(&broker, approval("r", 60)).await;
    let (won, late) = (decided.id().to_owned(), open(&broker, approval("r", 1)).await);
    let late_id = late.id().to_owned();
    decide(&broker, &won, OPERATOR, Decision::Approve(None)).await.unwrap();
    assert_eq!(late.wait().await, Outcome::TimedOut);
    assert_eq!(decided.wait().await, Outcome::Approved(None));
    let audit = broker.audit(AGENT).expect("a broker on a store keeps a record");
    // The expiry is appended in the background.
    let expired = until(|| async { audit.head().await.unwrap().seq >= 4 }).await;
    assert!(expired, "opened twice, decided, expired: {:?}", audit.page(0, 10).await);
    let (records, head) = audit.page(0, 10).await.unwrap();
    let events: Vec<(&str, &str)> =
        records.iter().map(|r| (r.event.as_str(), r.entry.as_deref().unwrap_or_default())).collect();
    assert_eq!(events, [("opened", won.as_str()), ("opened", &late_id), ("decided", &won), ("expired", &late_id)]);
    let decision = &records[2];
    assert_eq!(
        (decision.outcome.as_deref(), decision.by.as_deref(), decision.token.as_deref()),
        (Some("approved"), Some("api"), Some("oncall"))
    );
    assert!(records.iter().all(|r| r.surface.as_deref() == Some("api") && r.run_id.as_deref() == Some("r")));
    assert_eq!(audit.verify(Some(&head)).await.unwrap().unwrap(), head, "the chain holds");
    // An entry nobody waits on (an MCP approval whose client never came back) that the
    // clock ends is on the record too, once, whoever reads it first.
    let posted =
        broker.post(Opening { scope: Scope::new(AGENT, "mcp", "mcp", "r"), ..approval("r", 1) }).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    for _ in 0..3 {
        assert_eq!(outcome_of(&broker, &posted.id, Kind::Approval).await.as_deref(), Some("timed_out"));
    }
    let expired = until(|| async { audit.head().await.unwrap().seq >= head.seq + 2 }).await;
    assert!(expired, "{:?}", audit.page(head.seq, 10).await);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (records, head) = audit.page(head.seq, 10).await.unwrap();
    let events: Vec<(&str, Option<&str>)> = records.iter().map(|r| (r.event.as_str(), r.outcome.as_deref())).collect();
    assert_eq!(events, [("opened", None), ("expired", Some("timed_out"))]);
    assert!(records.iter().all(|r| r.entry.as_deref() == Some(posted.id.as_str())));
    // A broker opened again on the same store (a restart) reads the same record.
    let again = Broker::start(&open_store(), None);
    assert_eq!(again.audit(AGENT).unwrap().head().await.unwrap(), head);
}

/// Whether `check` holds within ten seconds (asked every 20 ms).
async fn until<F: std::future::Future<Output = bool>>(check: impl Fn() -> F) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while tokio::time::Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}
