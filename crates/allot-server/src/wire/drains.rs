//! Drains (an allot extension, issue 44) as the API shows them: the record, and each
//! claim as it is at the moment of the answer. The bodies are `allot-client`'s types.

use allot_client::drains::{Drain as Body, Unplaced};
use allot_core::drains::Drain;
use allot_core::{State, Timestamp, Uuid};

use crate::auth::format_utc;
use crate::wire::claim_body;

/// A drain as every endpoint answers it, with the consumers a new one left.
pub fn drain_body(
    view: &State,
    drain: &Drain,
    now: Timestamp,
    unplaced: &[(Uuid, String)],
) -> Body {
    Body {
        claims: drain
            .claims
            .iter()
            .filter_map(|c| view.claim(&c.claim))
            .map(|c| claim_body(c, now))
            .collect(),
        created_at: format_utc(drain.created_at),
        disabled: drain.disabled.clone(),
        ended_at: drain.ended_at.map(format_utc),
        roots: drain.roots.clone(),
        state: drain.state.as_str().to_owned(),
        unplaced: unplaced
            .iter()
            .map(|(consumer_uuid, reason)| Unplaced {
                consumer_uuid: *consumer_uuid,
                reason: reason.clone(),
            })
            .collect(),
        uuid: drain.uuid,
    }
}
