//! What skillhost answers a server on a client session: who it is (revision, client info, the
//! elicitation capability when a person can be asked), a server's `elicitation/create`
//! (passed to the call in flight, see [`Askers`]), and `notifications/tools/list_changed`
//! (the server's tools listed again on the same session).

use super::elicit;
use crate::person::Person;
use parking_lot::Mutex;
use rmcp::ClientHandler;
use rmcp::model::InputRequest;
use rmcp::model::RequestId;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability,
    ErrorData, FormElicitationCapability, Implementation, ProtocolVersion,
};
use rmcp::service::{InboundStreamOrigin, NotificationContext, Peer, RequestContext, RoleClient, ServiceError};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::{mpsc, oneshot};

/// A server's elicitation on its way to a person, and where the result goes.
type Pending = (ElicitRequestParams, oneshot::Sender<ElicitResult>);

/// The calls of one server now in flight that have a person to ask. A server's elicitation
/// goes to the person of the call it belongs to: on streamable HTTP it arrives on the response
/// stream of that call's POST (rmcp marks it with the call's request id, which
/// [`Askers::bind`] tied to the asking call). Where the transport cannot tell (stdio, the
/// legacy SSE stream, the standalone GET stream) it goes to the only call in flight, or, with
/// several, to the newest: the one most likely still waiting.
#[derive(Default)]
pub struct Askers {
    next: AtomicU64,
    open: Mutex<Vec<Open>>,
}

/// One asking call: its registration, where its elicitations go, and the request ids of the
/// `tools/call` requests it sent (a retry after authorization sends another).
struct Open {
    id: u64,
    tx: mpsc::UnboundedSender<Pending>,
    requests: Vec<RequestId>,
}

tokio::task_local! {
    /// The asking call the current task polls (set by [`Askers::asking`] around its work).
    static ASKING: u64;
}

/// Removes its call from [`Askers`] when the call ends.
pub struct Registered<'a> {
    askers: &'a Askers,
    id: u64,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.askers.open.lock().retain(|open| open.id != self.id);
    }
}

impl Askers {
    fn register(&self, tx: mpsc::UnboundedSender<Pending>) -> Registered<'_> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.open.lock().push(Open { id, tx, requests: Vec::new() });
        Registered { askers: self, id }
    }

    /// Ties `request` (a `tools/call` just sent) to the asking call this task runs, if any, so
    /// the server's elicitations on that request's stream reach its person.
    pub fn bind(&self, request: &RequestId) {
        let Ok(asking) = ASKING.try_with(|id| *id) else { return };
        let mut open = self.open.lock();
        if let Some(open) = open.iter_mut().find(|open| open.id == asking) {
            open.requests.push(request.clone());
        }
    }

    /// The answer to one request a server put in an `input_required` result, for the asking
    /// call this task runs: an elicitation goes to its person (declined with nobody to ask);
    /// sampling and roots, which skillhost never declares, are refused.
    pub async fn answer(&self, request: InputRequest) -> Result<serde_json::Value, ServiceError> {
        let params = match request {
            InputRequest::Elicitation(request) => request.params,
            _ => {
                let why = "the server asked for sampling or roots, which skillhost does not offer";
                return Err(ServiceError::McpError(ErrorData::invalid_request(why, None)));
            }
        };
        let asking = ASKING.try_with(|id| *id).ok();
        let tx = asking.and_then(|id| self.open.lock().iter().find(|open| open.id == id).map(|open| open.tx.clone()));
        let mut result = ElicitResult::new(ElicitationAction::Decline);
        if let Some(tx) = tx {
            let (reply, answer) = oneshot::channel();
            if tx.send((params, reply)).is_ok() {
                result = answer.await.unwrap_or(ElicitResult::new(ElicitationAction::Cancel));
            }
        }
        serde_json::to_value(result).map_err(|e| ServiceError::McpError(ErrorData::internal_error(e.to_string(), None)))
    }

    /// Where an elicitation goes: the call whose request it belongs to, when the transport
    /// says (`origin`), else the only or the newest call in flight.
    fn asker(&self, origin: Option<&InboundStreamOrigin>) -> Option<mpsc::UnboundedSender<Pending>> {
        let open = self.open.lock();
        if let Some(InboundStreamOrigin::OutboundRequest(request)) = origin
            && let Some(open) = open.iter().find(|open| open.requests.contains(request))
        {
            return Some(open.tx.clone());
        }
        open.last().map(|open| open.tx.clone())
    }

    /// Runs `work` (a call to the server) while answering the server's elicitations through
    /// `person`; the work goes on being polled while the person is asked.
    pub async fn asking<T>(&self, server: &str, person: &dyn Person, work: impl Future<Output = T>) -> T {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let registered = self.register(tx);
        let work = ASKING.scope(registered.id, work);
        tokio::pin!(work);
        loop {
            tokio::select! {
                out = &mut work => return out,
                Some((params, reply)) = rx.recv() => {
                    tokio::select! {
                        out = &mut work => return out,
                        result = elicit::elicit(server, params, person) => { let _ = reply.send(result); }
                    }
                }
            }
        }
    }
}

/// The client side of one server's session.
#[derive(Clone)]
pub struct Handler {
    /// The server's name, shown to the person who is asked.
    pub server: String,
    /// Whether a person can ever be asked in this process (the capability is declared then).
    pub people: bool,
    /// The server's calls in flight that can ask a person.
    pub askers: Arc<Askers>,
    /// Called with the session's peer when the server's tool list changed.
    pub tools_changed: Arc<dyn Fn(Peer<RoleClient>) + Send + Sync>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        if self.people {
            capabilities.elicitation =
                Some(ElicitationCapability::new().with_form(FormElicitationCapability::default()));
        }
        let implementation = Implementation::new("skillhost", env!("CARGO_PKG_VERSION"));
        ClientConfig::new(capabilities, implementation).with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let declined = ElicitResult::new(ElicitationAction::Decline);
        let origin = context.extensions.get::<InboundStreamOrigin>();
        let Some(tx) = self.askers.asker(origin).filter(|_| self.people) else {
            tracing::info!(server = %self.server, "MCP server asked for input with nobody to ask: declined");
            return Ok(declined);
        };
        let (reply, answer) = oneshot::channel();
        if tx.send((request, reply)).is_err() {
            return Ok(declined);
        }
        // The call ended before the person answered: there is nobody left to ask.
        Ok(answer.await.unwrap_or(ElicitResult::new(ElicitationAction::Cancel)))
    }

    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        (self.tools_changed)(context.peer);
    }
}
