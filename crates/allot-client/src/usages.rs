//! `GET /usages?project_id=...` (Placement 1.9+): what a project's consumers hold, per
//! resource class, summed over every provider.
//!
//! From 1.38 Placement groups the sums by consumer type (`{"usages": {"INSTANCE":
//! {"consumer_count": 2, "VCPU": 8}}}`); before that the classes sit directly under
//! `usages`. [`ProjectUsages`] reads either into the same totals, so a caller checking
//! what a project holds (the benchmark's read-back) need not know which microversion
//! it speaks.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::{path_segment, Client, Error, Method, Result};

/// A project's usage, summed over consumer types where the server grouped by them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProjectUsages {
    /// Amount held per resource class (a class nobody holds may be absent).
    pub classes: BTreeMap<String, u64>,
    /// How many consumers hold anything, when the server says (1.38+).
    pub consumer_count: Option<u64>,
}

impl ProjectUsages {
    /// The totals in a `GET /usages` body, in the form of either microversion range;
    /// `None` when a figure is not a whole number.
    fn from_body(usages: &serde_json::Map<String, Value>) -> Option<ProjectUsages> {
        let mut totals = ProjectUsages::default();
        for (key, value) in usages {
            match value {
                Value::Object(by_type) => {
                    let count = totals.consumer_count.get_or_insert(0);
                    for (class, amount) in by_type {
                        if class == "consumer_count" {
                            *count += amount.as_u64()?;
                        } else {
                            *totals.classes.entry(class.clone()).or_default() += amount.as_u64()?;
                        }
                    }
                }
                amount => *totals.classes.entry(key.clone()).or_default() += amount.as_u64()?,
            }
        }
        Some(totals)
    }
}

impl Client {
    /// `GET /usages?project_id=...` (1.9+): what the project's consumers hold.
    pub async fn project_usages(&self, project: &str) -> Result<ProjectUsages> {
        let path = format!("/usages?project_id={}", path_segment(project));
        let body = self.json(Method::GET, &path, None).await?;
        usages_of(path, &body)
    }

    /// The same at 1.37, the last microversion before consumer types: the totals per
    /// class, without a consumer count. OpenStack Placement 16 on PostgreSQL answers
    /// 500 to `GET /usages` from 1.38 on (its query selects the class without grouping
    /// by it, which PostgreSQL refuses), so a read-back that must work there asks
    /// this when that one fails.
    pub async fn project_usages_by_class(&self, project: &str) -> Result<ProjectUsages> {
        let path = format!("/usages?project_id={}", path_segment(project));
        let response = self.get_at(&path, "1.37").await?;
        if response.status != crate::StatusCode::OK {
            return Err(crate::refusal(Method::GET, &path, &response));
        }
        let body = crate::decode(Method::GET, &path, &response)?;
        usages_of(path, &body)
    }
}

/// The totals in a `GET /usages` answer.
fn usages_of(path: String, body: &Value) -> Result<ProjectUsages> {
    body["usages"]
        .as_object()
        .and_then(ProjectUsages::from_body)
        .ok_or_else(|| Error::Decode {
            method: Method::GET,
            path,
            message: "no usages object of whole numbers".into(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::stub;
    use crate::Config;
    use serde_json::json;

    #[tokio::test]
    async fn both_forms_read_into_the_same_totals() {
        let (url, server) = stub(vec![
            (
                "200 OK",
                json!({"usages": {
                    "INSTANCE": {"consumer_count": 2, "VCPU": 8, "MEMORY_MB": 1024},
                    "MIGRATION": {"consumer_count": 1, "VCPU": 1}
                }})
                .to_string(),
            ),
            (
                "200 OK",
                json!({"usages": {"VCPU": 9, "MEMORY_MB": 1024}}).to_string(),
            ),
            ("200 OK", json!({"usages": {"VCPU": -1}}).to_string()),
        ])
        .await;
        let client = Client::new(&Config::new(url)).unwrap();
        let grouped = client.project_usages("p 1").await.unwrap();
        assert_eq!(grouped.consumer_count, Some(3));
        let classes = BTreeMap::from([("MEMORY_MB".to_owned(), 1024), ("VCPU".to_owned(), 9)]);
        assert_eq!(grouped.classes, classes);
        let flat = client.project_usages("p").await.unwrap();
        assert_eq!(flat.consumer_count, None);
        assert_eq!(flat.classes, classes);
        let error = client.project_usages("p").await.unwrap_err();
        assert!(matches!(error, Error::Decode { .. }), "{error:?}");
        let requests = server.await.unwrap();
        assert!(
            requests[0].starts_with("GET /usages?project_id=p%201 "),
            "{}",
            requests[0]
        );
    }
}
