//! The read-back after `allot bench claims`: the server must hold exactly what it
//! accepted.
//!
//! Every run claims for a project of its own (`p-bench-` and a fresh uuid), so
//! `GET /usages?project_id=...` afterwards is the sum of this run's claims and nothing
//! else: exact in total whatever the shape already held and whatever earlier runs
//! left. Both modes write allocations (`PUT /allocations/{consumer}`), which is what
//! `/usages` counts. A claim the server never answered (transport error, timeout)
//! may or may not have been made, so it widens the bound instead of being guessed:
//! the usage of each class must lie between what was accepted and that plus what went
//! unanswered, and so must the consumer count where the microversion (1.38+) gives it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use allot_client::{Client, ProjectUsages};
use anyhow::bail;
use serde_json::{json, Value};

/// Amounts per resource class.
pub(super) type Amounts = BTreeMap<String, u64>;

/// What the clients' claims add up to, split by whether the server said yes.
#[derive(Debug, Default)]
pub(super) struct Ledger {
    /// Claims answered 2xx.
    pub accepted: u64,
    /// Their amounts, summed over providers.
    pub accepted_amounts: Amounts,
    /// Claims that got no answer at all.
    pub unanswered: u64,
    /// Their amounts: held or not, nobody told the client.
    pub unanswered_amounts: Amounts,
}

impl Ledger {
    /// One claim the server accepted; `allocations` as sent (`{rp: {"resources": ...}}`).
    pub fn accept(&mut self, allocations: &Value) {
        self.accepted += 1;
        add(&mut self.accepted_amounts, allocations);
    }

    /// One claim whose fate is unknown.
    pub fn unanswered(&mut self, allocations: &Value) {
        self.unanswered += 1;
        add(&mut self.unanswered_amounts, allocations);
    }

    pub fn merge(&mut self, other: Ledger) {
        self.accepted += other.accepted;
        self.unanswered += other.unanswered;
        for (mine, theirs) in [
            (&mut self.accepted_amounts, other.accepted_amounts),
            (&mut self.unanswered_amounts, other.unanswered_amounts),
        ] {
            for (class, n) in theirs {
                *mine.entry(class).or_default() += n;
            }
        }
    }

    /// Where `held` disagrees with the ledger, one line per figure; empty when it
    /// agrees.
    pub fn mismatches(&self, held: &ProjectUsages) -> Vec<String> {
        let mut classes: Vec<&String> = self
            .accepted_amounts
            .keys()
            .chain(self.unanswered_amounts.keys())
            .chain(held.classes.keys())
            .collect();
        classes.sort();
        classes.dedup();
        let mut wrong = Vec::new();
        for class in classes {
            let amount = |amounts: &Amounts| amounts.get(class).copied().unwrap_or(0);
            let accepted = amount(&self.accepted_amounts);
            let unknown = amount(&self.unanswered_amounts);
            wrong.extend(outside(class, amount(&held.classes), accepted, unknown));
        }
        if let Some(count) = held.consumer_count {
            wrong.extend(outside("consumers", count, self.accepted, self.unanswered));
        }
        wrong
    }

    pub fn json(&self) -> Value {
        json!({
            "accepted_amounts": self.accepted_amounts,
            "unanswered": self.unanswered,
            "unanswered_amounts": self.unanswered_amounts,
        })
    }
}

/// Sums a claim's `{rp: {"resources": {class: n}}}` into `amounts`.
fn add(amounts: &mut Amounts, allocations: &Value) {
    let providers = allocations.as_object().into_iter().flatten();
    for (_, provider) in providers {
        let resources = provider["resources"].as_object().into_iter().flatten();
        for (class, n) in resources {
            *amounts.entry(class.clone()).or_default() += n.as_u64().unwrap_or(0);
        }
    }
}

/// Why `held` is not within `accepted ..= accepted + unknown`, if it is not.
fn outside(what: &str, held: u64, accepted: u64, unknown: u64) -> Option<String> {
    if (accepted..=accepted + unknown).contains(&held) {
        return None;
    }
    Some(if unknown == 0 {
        format!("{what}: the server holds {held}, the run was granted {accepted}")
    } else {
        format!(
            "{what}: the server holds {held}, the run was granted {accepted} \
             and {unknown} more went unanswered"
        )
    })
}

/// What a run's accepted claims became on the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Holding {
    /// Allocations (`PUT /allocations`), counted by `GET /usages`.
    Allocations,
    /// allot's pending claims (`POST /claims`), counted by `GET /pending`.
    Claims,
}

/// Reads `project`'s usage (or pending totals) from `client` until it matches
/// `ledger`, for at most `patience` (zero: one read). A single node answers after
/// its write is visible, so one read is exact there; other nodes of a deployment
/// follow the shared log and may lag a moment behind the one asked.
pub(super) async fn verify(
    client: &Client,
    project: &str,
    ledger: &Ledger,
    patience: Duration,
    holding: Holding,
) -> anyhow::Result<ProjectUsages> {
    let started = Instant::now();
    let (path, what) = match holding {
        Holding::Allocations => ("usages", "usage"),
        Holding::Claims => ("pending", "pending totals"),
    };
    loop {
        let held = match holding {
            Holding::Allocations => match client.project_usages(project).await {
                // OpenStack Placement 16 on PostgreSQL: see `project_usages_by_class`.
                Err(e) if e.status() == Some(allot_client::StatusCode::INTERNAL_SERVER_ERROR) => {
                    client.project_usages_by_class(project).await?
                }
                other => other?,
            },
            // Pending totals carry no consumer count: the amounts alone are checked.
            Holding::Claims => ProjectUsages {
                classes: client.pending_totals(None, Some(project), None).await?,
                consumer_count: None,
            },
        };
        let wrong = ledger.mismatches(&held);
        if wrong.is_empty() {
            return Ok(held);
        }
        if started.elapsed() >= patience {
            bail!(
                "the server's {what} is not what it accepted (GET {}/{path}?project_id={project}):\n  {}",
                client.base(),
                wrong.join("\n  ")
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(vcpu: u64, memory: u64) -> Value {
        json!({"rp-a": {"resources": {"VCPU": vcpu}}, "rp-b": {"resources": {"MEMORY_MB": memory}}})
    }

    fn usages(vcpu: u64, memory: u64, consumers: Option<u64>) -> ProjectUsages {
        ProjectUsages {
            classes: Amounts::from([("MEMORY_MB".into(), memory), ("VCPU".into(), vcpu)]),
            consumer_count: consumers,
        }
    }

    #[test]
    fn accepted_claims_must_be_held_exactly() {
        let mut ledger = Ledger::default();
        ledger.accept(&claim(1, 512));
        let mut other = Ledger::default();
        other.accept(&claim(2, 512));
        ledger.merge(other);
        assert_eq!(ledger.accepted, 2);
        assert!(ledger.mismatches(&usages(3, 1024, Some(2))).is_empty());
        assert!(ledger.mismatches(&usages(3, 1024, None)).is_empty());
        // One unit too few, one too many, a consumer too many, a class never claimed.
        assert_eq!(
            ledger.mismatches(&usages(2, 1024, None)),
            ["VCPU: the server holds 2, the run was granted 3"]
        );
        assert_eq!(ledger.mismatches(&usages(3, 1025, None)).len(), 1);
        assert_eq!(
            ledger.mismatches(&usages(3, 1024, Some(3))),
            ["consumers: the server holds 3, the run was granted 2"]
        );
        let mut extra = usages(3, 1024, None);
        extra.classes.insert("DISK_GB".into(), 40);
        assert_eq!(
            ledger.mismatches(&extra),
            ["DISK_GB: the server holds 40, the run was granted 0"]
        );
        // Nothing held at all (an empty answer) is as wrong as too little.
        assert_eq!(ledger.mismatches(&ProjectUsages::default()).len(), 2);
    }

    #[test]
    fn an_unanswered_claim_may_or_may_not_be_held() {
        let mut ledger = Ledger::default();
        ledger.accept(&claim(1, 512));
        ledger.unanswered(&claim(4, 0));
        assert!(ledger.mismatches(&usages(1, 512, Some(1))).is_empty());
        assert!(ledger.mismatches(&usages(5, 512, Some(2))).is_empty());
        // Past the bound is wrong whatever became of the unanswered claim.
        let wrong = ledger.mismatches(&usages(6, 512, Some(3)));
        assert_eq!(wrong.len(), 2, "{wrong:?}");
        assert!(wrong[0].contains("4 more went unanswered"), "{wrong:?}");
    }
}
