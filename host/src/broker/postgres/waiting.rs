//! Chat turns waiting for a person, written down in the shared database so that no replica's
//! death or restart loses them.
//!
//! A chat turn on a shared store that asks for an approval writes, in one transaction, the
//! approval's entry (`skillhost_interactions`, marked `durable`: it is never cancelled because
//! its replica went silent) and the turn's checkpoint (`skillhost_waiting_turns`: where to
//! answer, the conversation, the call waiting). The decision is taken on any replica, as every
//! decision is. Then exactly one replica goes on with the turn, holding its lease
//! (`leased_by`, set by one conditional update):
//! - the replica that asked, when it is alive: woken by the decision, it takes the lease and
//!   goes on in memory ([`Shared::lease`]);
//! - otherwise any replica serving the same scope (the same bot of the same agent): it takes
//!   the turn whose owner is silent, decided or expired, with `FOR UPDATE SKIP LOCKED`
//!   ([`Shared::take_orphan`]), and resumes it from the checkpoint.
//!
//! The turn's row goes when the turn ends ([`Shared::finish`]). A turn whose lease holder
//! died too is forgotten after [`super::decisions::RETENTION`]: its calls may have run, and
//! running them again is what the lease exists to prevent.

use super::{COLUMNS, Entry, ORPHANED_AFTER, RETENTION, Shared, entry};
use crate::broker::model::{Orphan, Waiting};
use crate::store::StateError;

impl Shared {
    /// Records approval or question `approval` as pending, and the turn waiting on it,
    /// before anyone can see its id; a turn that waited before (an earlier round) is
    /// replaced.
    pub(super) async fn wait_durably(&self, approval: &Entry, waiting: &Waiting) -> Result<(), StateError> {
        let mut c = self.pg.client().await?;
        let tx = c.transaction().await.map_err(|e| self.pg.error(e))?;
        self.insert(&tx, approval, true).await?;
        tx.execute(
            "INSERT INTO skillhost_waiting_turns (run_id, scope, approval_id, replica, place, checkpoint, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, extract(epoch FROM clock_timestamp())::float8)
             ON CONFLICT (run_id) DO UPDATE SET scope = EXCLUDED.scope, approval_id = EXCLUDED.approval_id,
                replica = EXCLUDED.replica, leased_by = NULL, place = EXCLUDED.place,
                checkpoint = EXCLUDED.checkpoint, prompt = NULL, updated_at = EXCLUDED.updated_at",
            &[&waiting.run_id, &waiting.scope, &approval.id, &self.replica(), &waiting.place, &waiting.checkpoint],
        )
        .await
        .map_err(|e| self.pg.error(e))?;
        tx.commit().await.map_err(|e| self.pg.error(e))
    }

    /// Writes turn `run_id`'s checkpoint again while this replica holds it waiting (a call
    /// beside its question ended); nothing when another replica took it over.
    pub(super) async fn rewrite(&self, run_id: &str, checkpoint: &str) -> Result<(), StateError> {
        let c = self.pg.client().await?;
        c.execute(
            "UPDATE skillhost_waiting_turns SET checkpoint = $2, updated_at = extract(epoch FROM clock_timestamp())::float8
             WHERE run_id = $1 AND leased_by IS NULL AND replica = $3",
            &[&run_id, &checkpoint, &self.replica()],
        )
        .await
        .map(drop)
        .map_err(|e| self.pg.error(e))
    }

    /// Notes the message that asks, so that whoever resumes the turn can settle it.
    pub(super) async fn prompted(&self, run_id: &str, prompt: &str) -> Result<(), StateError> {
        let c = self.pg.client().await?;
        c.execute("UPDATE skillhost_waiting_turns SET prompt = $2 WHERE run_id = $1", &[&run_id, &prompt])
            .await
            .map(drop)
            .map_err(|e| self.pg.error(e))
    }

    /// Takes the lease of `run_id`, waiting on `approval_id`, for this replica: `false`
    /// when another replica took the turn over (it judged this one gone). A turn that is not
    /// written down (no row) is this replica's alone.
    pub(super) async fn lease(&self, run_id: &str, approval_id: &str) -> Result<bool, StateError> {
        let c = self.pg.client().await?;
        let row = c
            .query_opt(
                "SELECT leased_by IS NULL OR leased_by = $3, approval_id = $2
                 FROM skillhost_waiting_turns WHERE run_id = $1",
                &[&run_id, &approval_id, &self.replica()],
            )
            .await
            .map_err(|e| self.pg.error(e))?;
        let Some(row) = row else { return Ok(true) };
        if !row.get::<_, bool>(1) {
            return Ok(false);
        }
        let taken = c
            .execute(
                "UPDATE skillhost_waiting_turns SET leased_by = $3, updated_at = extract(epoch FROM clock_timestamp())::float8
                 WHERE run_id = $1 AND approval_id = $2 AND (leased_by IS NULL OR leased_by = $3)",
                &[&run_id, &approval_id, &self.replica()],
            )
            .await
            .map_err(|e| self.pg.error(e))?;
        Ok(taken == 1)
    }

    /// Forgets the turn `run_id` once it ended here (unless another replica holds it).
    pub(super) async fn finish(&self, run_id: &str) -> Result<(), StateError> {
        let c = self.pg.client().await?;
        c.execute(
            "DELETE FROM skillhost_waiting_turns
             WHERE run_id = $1 AND (leased_by = $2 OR leased_by IS NULL AND replica = $2)",
            &[&run_id, &self.replica()],
        )
        .await
        .map(drop)
        .map_err(|e| self.pg.error(e))
    }

    /// Takes one turn of `scope` whose replica went silent and whose approval was decided
    /// (or expired: then recorded as `timed_out`), or whose lease holder went silent while
    /// it went on (then [`Orphan::interrupted`]), to resume here; `None` when there is
    /// none. Of replicas looking at once, each takes a different turn.
    pub(super) async fn take_orphan(&self, scope: &str) -> Result<Option<Orphan>, StateError> {
        let c = self.pg.client().await?;
        let orphaned = ORPHANED_AFTER.as_secs_f64();
        let taken = c
            .query_opt(
                "WITH candidate AS (
                    SELECT t.run_id, t.leased_by AS held FROM skillhost_waiting_turns t
                    JOIN skillhost_interactions i ON i.id = t.approval_id
                    WHERE t.scope = $2
                      AND (t.leased_by IS NULL
                          AND (i.outcome IS NOT NULL OR i.expires_at <= extract(epoch FROM clock_timestamp())::float8)
                          OR t.leased_by IS NOT NULL AND t.leased_by <> $1)
                      AND NOT EXISTS (SELECT 1 FROM skillhost_replicas r WHERE r.id = coalesce(t.leased_by, t.replica)
                          AND r.seen_at >= extract(epoch FROM clock_timestamp())::float8 - $3)
                    ORDER BY t.updated_at LIMIT 1
                    FOR UPDATE OF t SKIP LOCKED)
                 UPDATE skillhost_waiting_turns t SET leased_by = $1, replica = $1,
                    updated_at = extract(epoch FROM clock_timestamp())::float8
                 FROM candidate WHERE t.run_id = candidate.run_id AND t.leased_by IS NOT DISTINCT FROM candidate.held
                 RETURNING t.run_id, t.scope, t.place, t.checkpoint, t.approval_id, t.prompt, candidate.held IS NOT NULL",
                &[&self.replica(), &scope, &orphaned],
            )
            .await
            .map_err(|e| self.pg.error(e))?;
        let Some(taken) = taken else { return Ok(None) };
        let waiting =
            Waiting { run_id: taken.get(0), scope: taken.get(1), place: taken.get(2), checkpoint: taken.get(3) };
        let (approval_id, prompt, interrupted): (String, Option<String>, bool) =
            (taken.get(4), taken.get(5), taken.get(6));
        // Nobody decided in time: the turn goes on without the call.
        self.settle_pending(&approval_id, "timed_out").await?;
        let row = c
            .query_opt(&format!("SELECT {COLUMNS} FROM skillhost_interactions WHERE id = $1"), &[&approval_id])
            .await
            .map_err(|e| self.pg.error(e))?;
        let Some(row) = row else {
            return Err(StateError::Other(format!("the approval {approval_id} of run {} is gone", waiting.run_id)));
        };
        Ok(Some(Orphan { waiting, approval: entry(&row), prompt, interrupted }))
    }

    /// The approval of `scope` still pending in conversation `channel_id` whose prompt is
    /// message `prompt` (a reply to it decides it, on a platform where a reply confirms).
    pub(super) async fn approval_prompted(
        &self,
        scope: &str,
        channel_id: &str,
        prompt: &str,
    ) -> Result<Option<String>, StateError> {
        let c = self.pg.client().await?;
        let row = c
            .query_opt(
                "SELECT t.approval_id FROM skillhost_waiting_turns t
                 JOIN skillhost_interactions i ON i.id = t.approval_id
                 WHERE t.scope = $1 AND t.prompt = $2 AND i.channel_id = $3 AND i.outcome IS NULL",
                &[&scope, &prompt, &channel_id],
            )
            .await
            .map_err(|e| self.pg.error(e))?;
        Ok(row.map(|r| r.get(0)))
    }

    /// The newest question pending in conversation `channel_id`, on any replica.
    pub(super) async fn pending_question(&self, channel_id: &str) -> Result<Option<String>, StateError> {
        let c = self.pg.client().await?;
        let row = c
            .query_opt(
                "SELECT id FROM skillhost_interactions
                 WHERE kind = 'question' AND channel_id = $1 AND outcome IS NULL
                   AND expires_at > extract(epoch FROM clock_timestamp())::float8
                 ORDER BY created_at DESC LIMIT 1",
                &[&channel_id],
            )
            .await
            .map_err(|e| self.pg.error(e))?;
        Ok(row.map(|r| r.get(0)))
    }

    /// Forgets turns whose lease holder went silent long ago (nobody can tell whether their
    /// calls ran) and decided turns whose scope nobody served for as long; a turn still
    /// waiting within its approval's time stays.
    pub(super) async fn sweep_waiting(&self) -> Result<(), StateError> {
        let c = self.pg.client().await?;
        let retention = RETENTION.as_secs_f64();
        let forgotten = c
            .execute(
                "DELETE FROM skillhost_waiting_turns t
                 WHERE t.updated_at < extract(epoch FROM clock_timestamp())::float8 - $1
                   AND NOT EXISTS (SELECT 1 FROM skillhost_replicas r WHERE r.id = coalesce(t.leased_by, t.replica))
                   AND NOT EXISTS (SELECT 1 FROM skillhost_interactions i WHERE i.id = t.approval_id
                       AND i.outcome IS NULL AND i.expires_at > extract(epoch FROM clock_timestamp())::float8)",
                &[&retention],
            )
            .await
            .map_err(|e| self.pg.error(e))?;
        if forgotten > 0 {
            tracing::warn!("forgot {forgotten} chat turn(s) whose replica has been gone for an hour");
        }
        Ok(())
    }
}
