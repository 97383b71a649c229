//! The change log's record format: a commit's changes as bytes, and back.
//!
//! JSON through the core's serde derives, in an envelope with a version, so that an
//! operator can read a row with `psql` or `sqlite3` and a node can refuse a record
//! written by a newer allot rather than misread it. Names are checked again on the
//! way in (`ResourceClass` and `TraitName` deserialise through `parse`).

use allot_core::Change;
use serde::{Deserialize, Serialize};

use crate::StoreError;

/// The record format this build writes and reads.
pub const VERSION: u32 = 1;

#[derive(Serialize)]
struct Out<'a> {
    version: u32,
    changes: &'a [Change],
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct In {
    version: u32,
    changes: Vec<Change>,
}

/// A commit's changes as a log record.
pub fn encode(changes: &[Change]) -> Vec<u8> {
    let mut record = Vec::new();
    encode_into(changes, &mut record);
    record
}

/// A commit's changes as a log record, in `record` (emptied first). For a writer
/// that keeps one buffer for every commit: a batch's record is tens of KiB under a
/// claim storm, and growing a new one each time cost the writer its reallocations
/// and, at a million roots, the page faults of the fresh memory they landed on
/// (docs/design/consumer-table.md).
pub fn encode_into(changes: &[Change], record: &mut Vec<u8>) {
    record.clear();
    serde_json::to_writer(
        &mut *record,
        &Out {
            version: VERSION,
            changes,
        },
    )
    // Serialising plain data with string map keys into memory cannot fail.
    .expect("changes serialise")
}

/// A log record's changes.
pub fn decode(record: &[u8]) -> Result<Vec<Change>, StoreError> {
    let read: In = serde_json::from_slice(record)
        .map_err(|e| StoreError::Corrupt(format!("change log record: {e}")))?;
    if read.version != VERSION {
        return Err(StoreError::Corrupt(format!(
            "change log record of version {} (this allot reads version {VERSION})",
            read.version
        )));
    }
    Ok(read.changes)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use allot_core::{
        Allocation, Claim, ClaimAmount, ClaimState, ClassMetadata, ClassRecord, ConsumerRow,
        Inventory, ProviderId, ProviderRow, ResourceClass, Text, TraitName, TraitRecord, Uuid,
    };

    /// One change of most kinds (the statements' tests use them too).
    pub(crate) fn every_kind() -> Vec<Change> {
        let class = ResourceClass::new_unchecked("CUSTOM_GOLD");
        let provider = ProviderRow {
            id: ProviderId(7),
            uuid: Uuid::from_u128(7),
            name: "cn \"7\" é".into(),
            generation: 3,
            parent: Some(ProviderId(1)),
            root: ProviderId(1),
            created_at: 1,
            updated_at: 2,
        };
        vec![
            Change::PutClass {
                record: ClassRecord {
                    name: class.clone(),
                    created_at: 1,
                    updated_at: 1,
                },
                old_name: Some(ResourceClass::new_unchecked("CUSTOM_OLD")),
            },
            Change::SetClassMetadata(
                class.clone(),
                Some(ClassMetadata {
                    units: Some("GiB".into()),
                    display_name: None,
                    description: Some("gold".into()),
                }),
            ),
            Change::PutTrait(TraitRecord {
                name: TraitName::new_unchecked("CUSTOM_T"),
                created_at: 4,
            }),
            Change::PutProvider {
                row: provider,
                previous_generation: Some(2),
            },
            Change::SetInventories(
                ProviderId(7),
                vec![(
                    class.clone(),
                    Inventory {
                        allocation_ratio: 1.1,
                        ..Inventory::with_total(10)
                    },
                )],
            ),
            Change::SetAggregates(ProviderId(7), vec![Uuid::from_u128(9)]),
            Change::PutConsumer {
                row: ConsumerRow {
                    uuid: Uuid::from_u128(5),
                    project_id: Text::from("p"),
                    user_id: Text::from("u"),
                    consumer_type: None,
                    generation: 1,
                    created_at: 1,
                    updated_at: 1,
                },
                previous_generation: None,
            },
            Change::SetAllocations(
                Uuid::from_u128(5),
                vec![Allocation {
                    provider: ProviderId(7),
                    class: class.clone(),
                    used: u64::MAX,
                }],
            ),
            Change::PutClaim(Box::new(Claim {
                uuid: Uuid::from_u128(11),
                consumer: Uuid::from_u128(5),
                project_id: Text::from("p"),
                user_id: Text::from("u"),
                consumer_type: Some(Text::from("INSTANCE")),
                tag: None,
                allocations: vec![ClaimAmount {
                    provider: Uuid::from_u128(7),
                    class,
                    amount: 2,
                }]
                .into(),
                state: ClaimState::Pending,
                created_at: 1,
                expires_at: Some(601),
                ended_at: None,
            })),
            Change::DeleteProvider(ProviderId(8)),
        ]
    }

    #[test]
    fn every_kind_of_change_reads_back_as_written() {
        let changes = every_kind();
        assert_eq!(decode(&encode(&changes)).unwrap(), changes);
    }

    /// A buffer kept between commits holds each record alone: a long record and then
    /// a short one read back as the short one.
    #[test]
    fn a_kept_buffer_holds_only_the_last_record() {
        let changes = every_kind();
        let mut record = Vec::new();
        encode_into(&changes, &mut record);
        assert_eq!(record, encode(&changes));
        encode_into(&changes[..1], &mut record);
        assert_eq!(decode(&record).unwrap(), changes[..1]);
    }

    #[test]
    fn a_damaged_or_newer_record_is_refused() {
        let good = String::from_utf8(encode(&every_kind())).unwrap();
        for bad in [
            good.replace("\"version\":1", "\"version\":2"),
            good.replace("CUSTOM_GOLD", "not a class"),
            good.replace("\"changes\"", "\"changez\""),
            good[..good.len() / 2].to_string(),
        ] {
            assert!(
                matches!(decode(bad.as_bytes()), Err(StoreError::Corrupt(_))),
                "{bad}"
            );
        }
    }
}
