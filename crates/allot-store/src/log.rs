//! The change log's record format: a commit's changes as bytes, and back.
//!
//! JSON through the core's serde derives, in an envelope with a version, so that an
//! operator can read a row with `psql` or `sqlite3` and a node can refuse a record
//! written by a newer allot rather than misread it. Names are checked again on the
//! way in (`ResourceClass` and `TraitName` deserialise through `parse`).
//!
//! # Changing what a record holds (docs/operations.md, "Upgrades")
//!
//! A record is read by builds other than the one that wrote it: on PostgreSQL every
//! node follows the log, old and new nodes side by side during a rolling upgrade,
//! and a fixture of each release's log is read by the upgrade test
//! (`crates/allot/tests/upgrade.rs`, `tests/upgrade/`). So, within one [`VERSION`],
//! [`Change`] and every record inside it (the rows of `allot_core::model`, claims,
//! class metadata, names) may change only in ways that leave every older record
//! readable:
//! - a new field, optional, marked `#[serde(default)]` (an older record lacks it,
//!   and reads as its default);
//! - a new variant of `Change` (older records do not hold it).
//!
//! Anything else (a field or variant renamed, removed or retyped, a new field
//! without `#[serde(default)]`, a name refused that an older build accepted) bumps
//! [`VERSION`], and [`decode`] keeps a decoder of each older version, converting its
//! records into today's changes. An older build never misreads a newer record: it
//! refuses a newer version or a variant it does not know ([`decode`]'s error names
//! the commit and the change), and reads a change with a field it does not know
//! without that field (only the envelope refuses unknown keys).

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

/// A log record's changes. A record this build cannot read is
/// [`StoreError::Corrupt`], saying why: another version, or which change (its
/// place and kind) does not decode.
pub fn decode(record: &[u8]) -> Result<Vec<Change>, StoreError> {
    decode_as(record, None)
}

/// The changes of commit `seq`'s record; an error names the commit.
pub(crate) fn decode_commit(seq: i64, record: &[u8]) -> Result<Vec<Change>, StoreError> {
    decode_as(record, Some(seq))
}

/// [`decode`], its errors naming commit `seq` when it is known. The name is only
/// written on the error path: a follower decodes every commit of the cluster.
fn decode_as(record: &[u8], seq: Option<i64>) -> Result<Vec<Change>, StoreError> {
    let corrupt = |why: String| {
        StoreError::Corrupt(match seq {
            Some(seq) => format!("change log commit {seq}: {why}"),
            None => format!("change log record: {why}"),
        })
    };
    let read: In = serde_json::from_slice(record).map_err(|e| corrupt(undecodable(record, e)))?;
    if read.version != VERSION {
        return Err(corrupt(other_version(read.version.into())));
    }
    Ok(read.changes)
}

/// Why a record that failed to decode did: its version, when it is not this
/// build's (a newer build's record need not parse as this version's at all), else
/// the first change that does not decode, by place and kind (the variant's name),
/// else `error` as it is. Only on the error path, so the record is parsed again as
/// plain JSON to find that change.
fn undecodable(record: &[u8], error: serde_json::Error) -> String {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(record) else {
        return error.to_string();
    };
    if let Some(version) = value.get("version").and_then(serde_json::Value::as_u64) {
        if version != u64::from(VERSION) {
            return other_version(version);
        }
    }
    let changes = value.get("changes").and_then(serde_json::Value::as_array);
    for (place, change) in changes.into_iter().flatten().enumerate() {
        if let Err(e) = Change::deserialize(change) {
            // A change is written as `{"Variant": ...}`, serde's externally tagged enum.
            let kind = change
                .as_object()
                .and_then(|fields| fields.keys().next())
                .map_or("not a change", String::as_str);
            return format!(
                "change {} of {} ({kind}): {e}",
                place + 1,
                changes.map_or(0, Vec::len)
            );
        }
    }
    error.to_string()
}

/// Why a record of another version is not read.
fn other_version(version: u64) -> String {
    format!("written in version {version} of the format (this allot reads version {VERSION})")
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

    /// What an older build does with a newer build's record that gained an optional
    /// field: it reads the change without the field (the rule in the module's doc).
    #[test]
    fn a_field_this_build_does_not_know_is_read_without_it() {
        let good = String::from_utf8(encode(&every_kind())).unwrap();
        let newer = good.replace(
            r#""name":"CUSTOM_T","created_at":4"#,
            r#""name":"CUSTOM_T","created_at":4,"colour":"gold""#,
        );
        assert_ne!(newer, good);
        assert_eq!(decode(newer.as_bytes()).unwrap(), every_kind());
    }

    /// A record this build cannot read names the change that fails, by place and
    /// kind, and the commit it belongs to when read from the log.
    #[test]
    fn an_undecodable_change_is_named() {
        let good = String::from_utf8(encode(&every_kind())).unwrap();
        let unknown = good.replace(r#"{"DeleteProvider":8}"#, r#"{"DrainProvider":8}"#);
        let missing = good.replace(
            r#""name":"CUSTOM_T","created_at":4"#,
            r#""name":"CUSTOM_T""#,
        );
        let newer = good.replace(r#"{"version":1,"#, r#"{"version":2,"extra":0,"#);
        for (record, expected) in [
            (&unknown, "change log commit 7: change 10 of 10 (DrainProvider): unknown variant `DrainProvider`"),
            (&missing, "change log commit 7: change 3 of 10 (PutTrait): missing field `created_at`"),
            (&newer, "change log commit 7: written in version 2 of the format (this allot reads version 1)"),
        ] {
            assert_ne!(record, &good);
            match decode_commit(7, record.as_bytes()) {
                Err(StoreError::Corrupt(why)) => assert!(why.starts_with(expected), "{why}"),
                other => panic!("{other:?}"),
            }
        }
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
