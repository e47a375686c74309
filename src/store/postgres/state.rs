//! Channel state on Postgres (issue 32): one opaque value per `(channel, key)`, one
//! statement per operation, bounded by the call timeout like every other.

use super::{PostgresStore, failed};
use crate::store::{StoreError, check_state, unix_seconds};

impl PostgresStore {
    /// `Store::get_channel_state`.
    pub(super) async fn state_get(
        &self,
        channel: &str,
        key: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        check_state("get_channel_state", key, &[])?;
        let row = self
            .query_opt(
                "get_channel_state",
                "SELECT value FROM im_bridge_channel_state WHERE channel = $1 AND key = $2",
                &[&channel, &key],
            )
            .await?;
        match row {
            Some(row) => row
                .try_get(0)
                .map(Some)
                .map_err(failed("get_channel_state")),
            None => Ok(None),
        }
    }

    /// `Store::put_channel_state`.
    pub(super) async fn state_put(
        &self,
        channel: &str,
        key: &str,
        value: &[u8],
    ) -> Result<(), StoreError> {
        check_state("put_channel_state", key, value)?;
        self.execute(
            "put_channel_state",
            "INSERT INTO im_bridge_channel_state (channel, key, value, updated_at)
                 VALUES ($1, $2, $3, $4)
                 ON CONFLICT (channel, key) DO UPDATE SET
                     value = EXCLUDED.value, updated_at = EXCLUDED.updated_at",
            &[&channel, &key, &value, &unix_seconds()],
        )
        .await?;
        Ok(())
    }

    /// `Store::delete_channel_state`.
    pub(super) async fn state_delete(&self, channel: &str, key: &str) -> Result<(), StoreError> {
        check_state("delete_channel_state", key, &[])?;
        self.execute(
            "delete_channel_state",
            "DELETE FROM im_bridge_channel_state WHERE channel = $1 AND key = $2",
            &[&channel, &key],
        )
        .await?;
        Ok(())
    }
}
