//! The replicas of one database: each says it is alive in `skillhost_replicas` (the person
//! broker's heartbeat writes it), a connection of its own listens for notifications, and a
//! session-level advisory lock lets one replica alone play a role.

use super::{Postgres, tls};
use crate::store::StateError;
use crate::store::with_causes;
use futures::StreamExt as _;
use std::time::Duration;

/// How often a replica says it is alive.
pub const HEARTBEAT: Duration = Duration::from_secs(2);
/// How long a replica may be silent before it is judged gone (its pending entries read as
/// cancelled, its turns and markers are taken over).
pub const ORPHANED_AFTER: Duration = Duration::from_secs(15);

/// A connection's half that must be polled for the client to work.
type Connection = tokio_postgres::Connection<
    tokio_postgres::Socket,
    <tokio_postgres_rustls::MakeRustlsConnect as tokio_postgres::tls::MakeTlsConnect<tokio_postgres::Socket>>::Stream,
>;

impl Postgres {
    /// Whether replica `id` has beaten within [`ORPHANED_AFTER`] (a replica that stopped
    /// took its row away).
    pub async fn replica_alive(&self, id: &str) -> Result<bool, StateError> {
        let c = self.client().await?;
        let row = c
            .query_opt(
                "SELECT 1 FROM skillhost_replicas
                 WHERE id = $1 AND seen_at >= extract(epoch FROM clock_timestamp())::float8 - $2",
                &[&id, &ORPHANED_AFTER.as_secs_f64()],
            )
            .await
            .map_err(|e| self.error(e))?;
        Ok(row.is_some())
    }

    /// A connection of its own (outside the pool) listening on `channel`: the client, to
    /// keep while listening, and the notifications' payloads, which end when the
    /// connection is lost.
    pub(crate) async fn listen(
        &self,
        channel: &str,
    ) -> Result<(tokio_postgres::Client, futures::channel::mpsc::UnboundedReceiver<String>), StateError> {
        self.migrated.get_or_try_init(|| self.migrate()).await?;
        let (client, mut connection) = self.own_connection().await?;
        let (tx, rx) = futures::channel::mpsc::unbounded();
        tokio::spawn(async move {
            let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
            while let Some(Ok(message)) = messages.next().await {
                if let tokio_postgres::AsyncMessage::Notification(n) = message
                    && tx.unbounded_send(n.payload().to_owned()).is_err()
                {
                    return;
                }
            }
        });
        client.batch_execute(&format!("LISTEN {channel}")).await.map_err(|e| self.error(e))?;
        Ok((client, rx))
    }

    /// A connection outside the pool, with its connection task to drive.
    async fn own_connection(&self) -> Result<(tokio_postgres::Client, Connection), StateError> {
        let tls = tls::connector(self.settings.ssl, self.settings.root_cert.as_deref())?;
        self.settings.config.connect(tls).await.map_err(|e| {
            StateError::Other(format!("state database {} unreachable: {}", self.settings.describe(), with_causes(&e)))
        })
    }
}

/// A replica's hold on a role only one replica may play at a time (polling a Telegram bot):
/// a session-level advisory lock on a connection of its own. The role is lost with the
/// connection (the database restarted, the network cut): [`Leadership::lost`] then returns,
/// and the holder must stop and stand for it again.
pub struct Leadership {
    _client: tokio_postgres::Client,
    lost: tokio::task::JoinHandle<()>,
}

impl Leadership {
    /// Returns once the connection holding the lock is gone.
    pub async fn lost(&mut self) {
        let _ = (&mut self.lost).await;
    }
}

impl Postgres {
    /// Takes the role `name` if no other session holds it: `None` when one does.
    pub async fn lead(&self, name: &str) -> Result<Option<Leadership>, StateError> {
        use sha2::Digest as _;
        let digest = sha2::Sha256::digest(format!("skillhost role {name}").as_bytes());
        let key = i64::from_be_bytes(digest[..8].try_into().unwrap_or_default());
        let (client, connection) = self.own_connection().await?;
        let lost = tokio::spawn(async move {
            let _ = connection.await;
        });
        let row = client.query_one("SELECT pg_try_advisory_lock($1)", &[&key]).await.map_err(|e| self.error(e))?;
        Ok(row.get::<_, bool>(0).then_some(Leadership { _client: client, lost }))
    }

    /// Stands for `role` until this replica plays it ([`Postgres::lead`]: `Some`) or `stop`
    /// resolves (`None`), trying again every [`ELECTION_RETRY`]. The log says once that
    /// another replica plays it, as `{label}another replica {plays}; standing by`.
    pub async fn elect(
        &self,
        role: &str,
        (label, plays): (&str, &str),
        stop: impl std::future::Future<Output = ()>,
    ) -> Option<Leadership> {
        let mut stop = std::pin::pin!(stop);
        let mut standing_by = false;
        loop {
            match self.lead(role).await {
                Ok(Some(leadership)) => {
                    tracing::info!("{label}this replica {plays}");
                    return Some(leadership);
                }
                Ok(None) if !standing_by => {
                    tracing::info!("{label}another replica {plays}; standing by");
                    standing_by = true;
                }
                Ok(None) => {}
                Err(e) => tracing::warn!("{label}cannot stand to be the replica that {plays}: {e}"),
            }
            tokio::select! {
                () = tokio::time::sleep(ELECTION_RETRY) => {}
                () = &mut stop => return None,
            }
        }
    }
}

/// How often a replica standing by for a role tries to take it.
pub const ELECTION_RETRY: Duration = Duration::from_secs(2);
