//! The allocation bodies: `PUT /allocations/{consumer}` and `POST /allocations`
//! (1.13) in the forms of every microversion (the 1.0 list, the 1.12 dict,
//! `project_id`/`user_id` from 1.8, `consumer_generation` from 1.28, `mappings` from
//! 1.34, `consumer_type` from 1.38), and the consumers' part of the reshaper, which
//! has the form of `POST /allocations`.
//!
//! [`ConsumerBody`] is the one typed form of a consumer's part of a write;
//! [`ConsumerBody::into_write`] turns it into the core's `ConsumerWrite` (providers as
//! the request spelled them, classes, amounts, the generation as given, owner and
//! type). Request objects keep the order of the text ([`Entries`]), because the rule
//! walks them in that order, as Placement does.

use allot_core::ops::allocations::{
    ConsumerGeneration, ConsumerWrite, Endpoint, Requested, INCOMPLETE_CONSUMER_ID,
};
use allot_core::{ProviderRef, ResourceClass, Uuid};
use serde::Deserialize;

use super::{not_valid, present, Entries, JsonBody};
use crate::error::ApiError;
use crate::params::uuid_like;
use crate::schemas;

/// A consumer uuid as a path or a body key gives it, read as Placement reads uuids.
pub fn consumer_uuid(raw: &str) -> Result<Uuid, ApiError> {
    uuid_like(raw).ok_or_else(|| ApiError::bad_request(format!("Malformed consumer_uuid: {raw}")))
}

/// The amounts a request asks for, by provider as it spells them and then by class,
/// in request order, as the core's requests: the allocations of a write and of a
/// claim alike.
pub(crate) fn requested(by_provider: Vec<(String, Entries<u64>)>) -> Vec<Requested> {
    let mut allocations = Vec::new();
    for (uuid, Entries(resources)) in by_provider {
        let provider = ProviderRef::parse(&uuid);
        for (class, used) in resources {
            allocations.push(Requested {
                provider: provider.clone(),
                // The schema's pattern has no length limit: a key too long to be a
                // class is refused by the rule as an unknown class.
                class: ResourceClass::requested(&class),
                used,
            });
        }
    }
    allocations
}

/// `PUT /allocations/{consumer}` at `1.minor`: the consumer's write.
pub fn read_put(body: &JsonBody, consumer: Uuid, minor: u16) -> Result<ConsumerWrite, ApiError> {
    let body: ConsumerBody = body.read(&schemas::allocations_put(minor))?;
    Ok(body.into_write(consumer, minor))
}

/// `POST /allocations` at `1.minor`: every consumer's write, in request order.
pub fn read_post(body: &JsonBody, minor: u16) -> Result<Vec<ConsumerWrite>, ApiError> {
    let consumers = body.read(&schemas::allocations_post(minor))?;
    consumer_writes(consumers, minor, Endpoint::Post)
}

/// One consumer's part of a write, in the form of any microversion: the whole body of
/// `PUT /allocations/{consumer}`, and each consumer's entry in `POST /allocations` and
/// in the reshaper's `allocations`. Read from the tree the schema has checked, so
/// every field has the type and range it says. `mappings` (1.34) is checked there and
/// otherwise ignored, as Placement stores nothing of it.
#[derive(Debug, Deserialize)]
pub struct ConsumerBody {
    allocations: AllocationsBody,
    project_id: Option<String>,
    user_id: Option<String>,
    /// Left out (before 1.28), null (a new consumer) or any integer.
    #[serde(default, deserialize_with = "present")]
    consumer_generation: Option<Option<i128>>,
    consumer_type: Option<String>,
}

/// The allocations of one consumer.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum AllocationsBody {
    /// Before 1.12: a list of `{resource_provider: {uuid}, resources}`.
    List(Vec<ListedAllocation>),
    /// From 1.12: `{resources}` by provider uuid.
    ByProvider(Entries<ProviderAmounts>),
}

#[derive(Debug, Deserialize)]
struct ListedAllocation {
    resource_provider: ProviderName,
    resources: Entries<u64>,
}

#[derive(Debug, Deserialize)]
struct ProviderName {
    uuid: String,
}

/// A provider's part of the dict form (its `generation`, which clients may copy
/// from a GET, is ignored, as Placement ignores it).
#[derive(Debug, Deserialize)]
struct ProviderAmounts {
    resources: Entries<u64>,
}

impl ConsumerBody {
    /// The core's write for `consumer`, at microversion `1.minor`.
    pub fn into_write(self, consumer: Uuid, minor: u16) -> ConsumerWrite {
        let by_provider: Vec<(String, Entries<u64>)> = match self.allocations {
            AllocationsBody::List(items) => {
                // Placement turns the list into a dict by provider uuid, so a provider
                // listed twice keeps its first place and its last amounts.
                let mut by_provider: Vec<(String, Entries<u64>)> = Vec::new();
                for item in items {
                    let uuid = item.resource_provider.uuid;
                    match by_provider.iter_mut().find(|(u, _)| *u == uuid) {
                        Some(slot) => slot.1 = item.resources,
                        None => by_provider.push((uuid, item.resources)),
                    }
                }
                by_provider
            }
            AllocationsBody::ByProvider(Entries(entries)) => entries
                .into_iter()
                .map(|(uuid, amounts)| (uuid, amounts.resources))
                .collect(),
        };
        let allocations = requested(by_provider);

        // Before 1.8 neither is allowed, and Placement uses its "incomplete consumer"
        // project and user.
        let owner = |id: Option<String>| match id {
            Some(id) if minor >= 8 => id,
            _ => INCOMPLETE_CONSUMER_ID.to_owned(),
        };
        let generation = match self.consumer_generation {
            _ if minor < 28 => ConsumerGeneration::Unchecked,
            Some(Some(given)) => ConsumerGeneration::Is(given),
            _ => ConsumerGeneration::New,
        };
        ConsumerWrite {
            consumer,
            project_id: owner(self.project_id),
            user_id: owner(self.user_id),
            consumer_type: self.consumer_type.filter(|_| minor >= 38),
            generation,
            allocations,
        }
    }
}

/// The consumers of a `POST /allocations` body, or of the reshaper's `allocations`
/// (which has the same form), as the core's writes, in request order.
pub fn consumer_writes(
    consumers: Entries<ConsumerBody>,
    minor: u16,
    endpoint: Endpoint,
) -> Result<Vec<ConsumerWrite>, ApiError> {
    let mut writes: Vec<ConsumerWrite> = Vec::new();
    for (key, body) in consumers.0 {
        // The schema let through 36 hex digits and dashes; Placement would keep a
        // key it cannot read as a uuid as an opaque consumer id, which we cannot.
        let consumer = match endpoint {
            Endpoint::Reshaper => uuid_like(&key)
                .ok_or_else(|| not_valid(format!("'{key}' is not a valid consumer uuid")))?,
            Endpoint::Put | Endpoint::Post => consumer_uuid(&key)?,
        };
        // Two spellings of one uuid name one consumer here: the last one wins.
        writes.retain(|w| w.consumer != consumer);
        writes.push(body.into_write(consumer, minor));
    }
    Ok(writes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::validate;
    use crate::schemas::{allocations_post, allocations_put};
    use serde_json::{json, Value};

    const RP: &str = "7260669a-e3d4-4867-aaa7-683e2ab6958c";
    const C: &str = "599ffd2d-526a-4b2e-8683-f13ad25f9958";

    /// A body as the handlers read it: parsed once into a tree, then typed.
    fn body<T: serde::de::DeserializeOwned>(text: &str) -> T {
        let value: Value = serde_json::from_str(text).unwrap();
        serde_json::from_value(value).unwrap()
    }

    fn write(text: &str, minor: u16) -> ConsumerWrite {
        body::<ConsumerBody>(text).into_write(Uuid::nil(), minor)
    }

    #[test]
    fn entries_keep_order_and_python_duplicates() {
        let Entries(entries) =
            body::<Entries<Value>>(r#"{"b": 1, "a": [true, null, "x"], "b": 2}"#);
        let keys: Vec<&str> = entries.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["b", "a"]);
        assert_eq!(entries[0].1, json!(2));
        assert_eq!(entries[1].1.as_array().map(Vec::len), Some(3));
    }

    #[test]
    fn claims_by_microversion() {
        let list = format!(
            r#"{{"allocations": [
                {{"resource_provider": {{"uuid": "{RP}"}}, "resources": {{"VCPU": 1}}}},
                {{"resource_provider": {{"uuid": "X"}}, "resources": {{"VCPU": 1}}}},
                {{"resource_provider": {{"uuid": "{RP}"}}, "resources": {{"DISK_GB": 5, "VCPU": 2}}}}
            ]}}"#
        );
        let w = write(&list, 7);
        // A provider listed twice keeps its first place and its last amounts; one
        // that is not spelled as a uuid is kept as written.
        let got: Vec<(String, &str, u64)> = w
            .allocations
            .iter()
            .map(|r| (r.provider.to_string(), r.class.as_str(), r.used))
            .collect();
        assert_eq!(
            got,
            [
                (RP.to_owned(), "DISK_GB", 5),
                (RP.to_owned(), "VCPU", 2),
                ("X".to_owned(), "VCPU", 1)
            ]
        );
        assert_eq!(w.allocations[2].provider, ProviderRef::Spelled("X".into()));
        // A key the schema's pattern lets through but too long to be a class is
        // handed on as text that names none.
        let long = "A".repeat(256);
        let w = write(
            &format!(
                r#"{{"allocations": [{{"resource_provider": {{"uuid": "{RP}"}},
                    "resources": {{"{long}": 1}}}}]}}"#
            ),
            7,
        );
        assert_eq!(
            w.allocations[0].class,
            allot_core::RequestedName::NotAName(long)
        );
        assert_eq!(w.project_id, INCOMPLETE_CONSUMER_ID);
        assert_eq!(w.generation, ConsumerGeneration::Unchecked);

        let dict = |extra: &str| {
            format!(
                r#"{{"allocations": {{"{RP}": {{"resources": {{"VCPU": 1}}}}}},
                    "project_id": "p", "user_id": "u"{extra}}}"#
            )
        };
        let w = write(&dict(""), 12);
        assert_eq!((w.project_id.as_str(), w.user_id.as_str()), ("p", "u"));
        assert_eq!(
            w.allocations[0].provider,
            ProviderRef::Uuid(RP.parse().unwrap())
        );
        let cases = [
            (
                r#", "consumer_generation": null"#,
                28,
                ConsumerGeneration::New,
            ),
            (
                r#", "consumer_generation": 4"#,
                28,
                ConsumerGeneration::Is(4),
            ),
            // Negative, and beyond i64: kept as given, for the conflict message.
            (
                r#", "consumer_generation": -1"#,
                28,
                ConsumerGeneration::Is(-1),
            ),
            (
                r#", "consumer_generation": 18446744073709551615"#,
                28,
                ConsumerGeneration::Is(u64::MAX.into()),
            ),
            (
                r#", "consumer_generation": 4"#,
                27,
                ConsumerGeneration::Unchecked,
            ),
        ];
        for (extra, minor, generation) in cases {
            assert_eq!(write(&dict(extra), minor).generation, generation, "{extra}");
        }
        let typed = dict(r#", "consumer_generation": null, "consumer_type": "INSTANCE""#);
        assert_eq!(write(&typed, 38).consumer_type.as_deref(), Some("INSTANCE"));
        assert_eq!(write(&typed, 37).consumer_type, None);
    }

    #[test]
    fn consumers_by_uuid() {
        let one = |n: u64| {
            format!(
                r#"{{"allocations": {{"{RP}": {{"resources": {{"VCPU": {n}}}}}}},
                    "project_id": "p", "user_id": "u"}}"#
            )
        };
        let upper = C.to_uppercase();
        let other = "7260669a-0000-4867-aaa7-683e2ab6958c";
        let text = format!(
            r#"{{"{C}": {}, "{other}": {}, "{upper}": {}}}"#,
            one(1),
            one(2),
            one(3)
        );
        let writes = consumer_writes(body(&text), 13, Endpoint::Post).unwrap();
        // Two spellings of one uuid: one consumer, the last one, in its place.
        let got: Vec<(String, u64)> = writes
            .iter()
            .map(|w| (w.consumer.to_string(), w.allocations[0].used))
            .collect();
        assert_eq!(got, [(other.to_owned(), 2), (C.to_owned(), 3)]);

        let bad = "0123456789abcdef0123456789abcdef012-";
        let text = format!(r#"{{"{bad}": {}}}"#, one(1));
        let e = consumer_writes(body(&text), 13, Endpoint::Post).unwrap_err();
        assert_eq!(e.message, format!("Malformed consumer_uuid: {bad}"));
        let e = consumer_writes(body(&text), 30, Endpoint::Reshaper).unwrap_err();
        assert_eq!(
            e.message,
            format!("JSON does not validate: '{bad}' is not a valid consumer uuid")
        );
    }

    #[test]
    fn schemas_by_microversion() {
        let err = |v: Value, s: Value| validate(&v, &s).unwrap_err().to_string();
        let rp =
            |resources: Value| json!([{"resource_provider": {"uuid": RP}, "resources": resources}]);
        assert!(validate(
            &json!({"allocations": rp(json!({"DISK_GB": 10}))}),
            &allocations_put(7)
        )
        .is_ok());
        assert!(err(json!({"allocations": []}), allocations_put(7))
            .contains("Failed validating 'minItems'"));
        assert!(err(
            json!({"allocations": rp(json!({"DISK_GB": 0}))}),
            allocations_put(7)
        )
        .starts_with("0 is less than the minimum of 1"));
        assert!(
            err(json!({"allocations": rp(json!({}))}), allocations_put(7))
                .contains("should be non-empty")
        );
        // project_id and user_id: refused before 1.8, required from it.
        let owned =
            json!({"allocations": rp(json!({"DISK_GB": 10})), "project_id": "p", "user_id": "u"});
        assert!(err(owned.clone(), allocations_put(7))
            .contains("Additional properties are not allowed"));
        assert!(validate(&owned, &allocations_put(8)).is_ok());
        assert!(err(
            json!({"allocations": rp(json!({"DISK_GB": 10})), "user_id": "u"}),
            allocations_put(8)
        )
        .contains("Failed validating 'required'"));
        // The dict form from 1.12, empty from 1.28.
        assert!(err(owned, allocations_put(12)).contains("is not of type 'object'"));
        let dict =
            |allocs: Value| json!({"allocations": allocs, "project_id": "p", "user_id": "u"});
        assert!(err(
            dict(json!({"nice_house_friend": {"resources": {"VCPU": 1}}})),
            allocations_put(12)
        )
        .contains("does not match any of the regexes"));
        assert!(err(dict(json!({})), allocations_put(12)).starts_with("{} should be non-empty"));
        assert!(err(dict(json!({})), allocations_put(28))
            .starts_with("'consumer_generation' is a required property"));
        let mut body = dict(json!({}));
        body["consumer_generation"] = Value::Null;
        assert!(validate(&body, &allocations_put(28)).is_ok());
        // mappings from 1.34, consumer_type required from 1.38.
        body["mappings"] = json!({"alpha": "beta"});
        assert!(err(body.clone(), allocations_put(33)).contains("'mappings' was unexpected"));
        assert!(err(body.clone(), allocations_put(34)).starts_with("'beta' is not of type 'array'"));
        body["mappings"] = json!({"": [RP]});
        assert!(validate(&body, &allocations_put(34)).is_ok());
        assert!(err(body.clone(), allocations_put(38))
            .starts_with("'consumer_type' is a required property"));
        body["consumer_type"] = json!("instance");
        assert!(err(body.clone(), allocations_put(38))
            .starts_with("'instance' does not match '^[A-Z0-9_]+$'"));
        // POST: consumers by uuid, each possibly empty.
        assert!(validate(&json!({C: dict(json!({}))}), &allocations_post(13)).is_ok());
        assert!(err(json!({}), allocations_post(13)).contains("should be non-empty"));
        assert!(err(json!({C: dict(json!({}))}), allocations_post(28))
            .contains("'consumer_generation' is a required"));
    }
}
