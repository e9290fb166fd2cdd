//! Snowflake IDs through the service (docs/design.md, "One service under
//! every door"): the generator is reached here only, so every door draws
//! under the same rule as a sequence draw (under `--client-auth on`, a
//! token with `draw` covering the name [`SNOWFLAKE_NAME`]) and its
//! failures come out as [`ServiceError`]s, logged here where they are
//! narrowed.

use super::access::SNOWFLAKE_NAME;
use super::{Presented, Service, ServiceError, Want};
use crate::domain::{Count, SeqNameRef};
use crate::log_throttle::throttled;
use crate::snowflake::{Decoded, Layout, Snowflake, SnowflakeError};

/// A snowflake ID read back with this instance's layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodedId {
    /// Its timestamp, worker ID and sequence.
    pub parts: Decoded,
    /// The start of its time unit, in milliseconds since the Unix epoch.
    pub unit_start_ms: i64,
}

impl Service {
    /// This service drawing snowflake IDs from `snowflake` (`None`: every
    /// snowflake call is refused [`ServiceError::SnowflakeDisabled`]).
    pub fn with_snowflake(mut self, snowflake: Option<Snowflake>) -> Self {
        self.snowflake = snowflake;
        self
    }

    /// The snowflake generator, when this instance serves snowflake IDs:
    /// its status for health and metrics.
    pub fn snowflake(&self) -> Option<&Snowflake> {
        self.snowflake.as_ref()
    }

    /// One snowflake ID, for a caller who presented `who`.
    pub async fn snowflake_next(&self, who: Presented<'_>) -> Result<i64, ServiceError> {
        let (sf, caller) = self.snowflake_for(who)?;
        let id = sf.next().await.map_err(ServiceError::from_snowflake)?;
        caller.drew(&self.access, 1);
        Ok(id)
    }

    /// `count` snowflake IDs, strictly increasing, for a caller who
    /// presented `who`.
    pub async fn snowflake_batch(
        &self,
        who: Presented<'_>,
        count: Count,
    ) -> Result<Vec<i64>, ServiceError> {
        let (sf, caller) = self.snowflake_for(who)?;
        let ids = sf
            .batch(count.get() as usize)
            .await
            .map_err(ServiceError::from_snowflake)?;
        caller.drew(&self.access, ids.len() as u64);
        Ok(ids)
    }

    /// The parts of snowflake ID `id`, read with this instance's layout.
    /// Open to every caller: it reads nothing but the layout, which the ID
    /// itself carries. A negative `id` is no snowflake ID.
    pub fn snowflake_decode(&self, id: i64) -> Result<DecodedId, ServiceError> {
        let layout: &Layout = self
            .snowflake
            .as_ref()
            .ok_or(ServiceError::SnowflakeDisabled)?
            .layout();
        let parts = layout
            .decode(id)
            .ok_or_else(|| ServiceError::InvalidRequest("an ID is never negative".into()))?;
        Ok(DecodedId {
            unit_start_ms: layout.unit_start_ms(parts.timestamp),
            parts,
        })
    }

    /// The generator and the caller allowed to draw from it.
    fn snowflake_for(
        &self,
        who: Presented<'_>,
    ) -> Result<(&Snowflake, super::Caller), ServiceError> {
        let sf = self
            .snowflake
            .as_ref()
            .ok_or(ServiceError::SnowflakeDisabled)?;
        let name = SeqNameRef::validated(SNOWFLAKE_NAME);
        let caller = self.access.authorize(who, Want::Draw(name))?;
        Ok((sf, caller))
    }
}

impl ServiceError {
    /// Narrows a snowflake generator error, logging what operators need.
    pub fn from_snowflake(e: SnowflakeError) -> Self {
        match &e {
            SnowflakeError::ClockMovedBackwards { behind_ms } => throttled!(
                warn,
                "snowflake: clock behind the last timestamp issued; refusing",
                None,
                behind_ms
            ),
            SnowflakeError::ClockStalled { waited_ms } => {
                throttled!(warn, "snowflake: clock did not advance", None, waited_ms)
            }
            SnowflakeError::Exhausted => {
                throttled!(error, "snowflake: timestamps ran out", None)
            }
            _ => {}
        }
        ServiceError::Snowflake(e)
    }
}
