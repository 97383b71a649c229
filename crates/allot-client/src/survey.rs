//! The GETs that show everything a client can see of a deployment, found by walking
//! it through the API: what `allot verify` asks a Placement and an allot alike, to
//! compare the answers.
//!
//! [`Survey::of`] walks one endpoint: the providers (`GET /resource_providers`), each
//! one's inventories (the classes it offers, for candidate queries) and allocations
//! (its consumers), and each consumer's allocations (its project). Surveys of both
//! endpoints are merged, so that a provider or consumer only one of them has is asked
//! of both. [`Survey::probes`] turns it into the GETs to compare, each at every
//! microversion asked for where the URL exists; [`fetch`] asks them with bounded
//! concurrency. Judging the answers is the caller's business.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::{path_segment, Client, Method, Response, Result};

/// The microversion the walk reads at (every field it needs is there).
const WALK_AT: &str = "1.39";

/// What a walk found.
#[derive(Debug, Clone, Default)]
pub struct Survey {
    /// Provider uuids.
    pub providers: BTreeSet<String>,
    /// Consumer uuids (from the providers' allocations).
    pub consumers: BTreeSet<String>,
    /// Project ids of those consumers.
    pub projects: BTreeSet<String>,
    /// Each provider's resource classes, sorted: the candidate queries' material.
    pub class_sets: BTreeSet<Vec<String>>,
}

/// One GET to ask both endpoints.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Probe {
    /// Path and query.
    pub path: String,
    /// The microversion it is asked at.
    pub microversion: String,
}

/// The microversion a URL appeared in (1.2 classes, 1.6 traits, 1.9 `/usages`, 1.10
/// candidates, 1.1 aggregates), to leave out what the version cannot answer.
fn since(path: &str) -> (u32, u32) {
    if path.starts_with("/allocation_candidates") {
        (1, 10)
    } else if path.starts_with("/usages") {
        (1, 9)
    } else if path.starts_with("/traits") || path.ends_with("/traits") {
        (1, 6)
    } else if path.starts_with("/resource_classes") {
        (1, 2)
    } else if path.ends_with("/aggregates") {
        (1, 1)
    } else {
        (1, 0)
    }
}

/// `1.29` as (1, 29); `latest` and anything else as the newest.
fn parse_version(v: &str) -> (u32, u32) {
    v.split_once('.')
        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
        .unwrap_or((u32::MAX, u32::MAX))
}

impl Survey {
    /// Walks `client`'s deployment with at most `parallel` requests at once.
    pub async fn of(client: &Client, parallel: usize) -> Result<Survey> {
        let list = json(client, "/resource_providers").await?;
        let mut survey = Survey::default();
        for p in list["resource_providers"].as_array().into_iter().flatten() {
            if let Some(uuid) = p["uuid"].as_str() {
                survey.providers.insert(uuid.to_owned());
            }
        }
        let mut paths = Vec::new();
        for uuid in &survey.providers {
            paths.push(format!("/resource_providers/{uuid}/inventories"));
            paths.push(format!("/resource_providers/{uuid}/allocations"));
        }
        for body in json_all(client, paths, parallel).await? {
            if let Some(inventories) = body["inventories"].as_object() {
                let mut classes: Vec<String> = inventories.keys().cloned().collect();
                classes.sort();
                if !classes.is_empty() {
                    survey.class_sets.insert(classes);
                }
            }
            if let Some(allocations) = body["allocations"].as_object() {
                survey.consumers.extend(allocations.keys().cloned());
            }
        }
        let paths = survey
            .consumers
            .iter()
            .map(|c| format!("/allocations/{}", path_segment(c)))
            .collect();
        for body in json_all(client, paths, parallel).await? {
            if let Some(project) = body["project_id"].as_str() {
                survey.projects.insert(project.to_owned());
            }
        }
        Ok(survey)
    }

    /// Adds what `other` found.
    pub fn merge(&mut self, other: Survey) {
        self.providers.extend(other.providers);
        self.consumers.extend(other.consumers);
        self.projects.extend(other.projects);
        self.class_sets.extend(other.class_sets);
    }

    /// The candidate queries: one per provider's set of classes (one of each), then
    /// one per class alone, at most `max` in all.
    pub fn candidate_queries(&self, max: usize) -> Vec<String> {
        let singles: BTreeSet<Vec<String>> = self
            .class_sets
            .iter()
            .flatten()
            .map(|c| vec![c.clone()])
            .collect();
        let mut seen = BTreeSet::new();
        self.class_sets
            .iter()
            .chain(&singles)
            .filter(|set| seen.insert((*set).clone()))
            .take(max)
            .map(|set| {
                let amounts: Vec<String> = set.iter().map(|c| format!("{c}:1")).collect();
                format!("/allocation_candidates?resources={}", amounts.join(","))
            })
            .collect()
    }

    /// Every GET to compare, each at every one of `microversions` where its URL
    /// exists, with at most `candidates` candidate queries.
    pub fn probes(&self, microversions: &[String], candidates: usize) -> Vec<Probe> {
        let mut paths = vec![
            "/resource_providers".to_owned(),
            "/resource_classes".to_owned(),
            "/traits".to_owned(),
        ];
        for uuid in &self.providers {
            let base = format!("/resource_providers/{uuid}");
            for sub in [
                "",
                "/inventories",
                "/traits",
                "/aggregates",
                "/usages",
                "/allocations",
            ] {
                paths.push(format!("{base}{sub}"));
            }
        }
        for consumer in &self.consumers {
            paths.push(format!("/allocations/{}", path_segment(consumer)));
        }
        for project in &self.projects {
            paths.push(format!("/usages?project_id={}", path_segment(project)));
        }
        paths.extend(self.candidate_queries(candidates));
        let mut probes = Vec::new();
        for path in paths {
            for v in microversions {
                if parse_version(v) >= since(&path) {
                    probes.push(Probe {
                        path: path.clone(),
                        microversion: v.clone(),
                    });
                }
            }
        }
        probes
    }
}

/// Asks every probe of `client`, at most `parallel` at once; the answers in the
/// probes' order.
pub async fn fetch(client: &Client, probes: &[Probe], parallel: usize) -> Vec<Result<Response>> {
    let mut answers: Vec<Option<Result<Response>>> = probes.iter().map(|_| None).collect();
    let mut tasks = tokio::task::JoinSet::new();
    let mut next = 0;
    loop {
        while tasks.len() < parallel.max(1) && next < probes.len() {
            let (client, probe, i) = (client.clone(), probes[next].clone(), next);
            tasks.spawn(async move { (i, client.get_at(&probe.path, &probe.microversion).await) });
            next += 1;
        }
        match tasks.join_next().await {
            Some(Ok((i, answer))) => answers[i] = Some(answer),
            Some(Err(e)) => std::panic::resume_unwind(e.into_panic()),
            None => break,
        }
    }
    answers
        .into_iter()
        .map(|a| a.expect("every probe is answered"))
        .collect()
}

/// `GET path` at the walk's microversion, which must be 200 with JSON.
async fn json(client: &Client, path: &str) -> Result<Value> {
    let response = client.get_at(path, WALK_AT).await?;
    decode_ok(path, &response)
}

/// [`json`] for many paths at once.
async fn json_all(client: &Client, paths: Vec<String>, parallel: usize) -> Result<Vec<Value>> {
    let probes: Vec<Probe> = paths
        .into_iter()
        .map(|path| Probe {
            path,
            microversion: WALK_AT.to_owned(),
        })
        .collect();
    let answers = fetch(client, &probes, parallel).await;
    probes
        .iter()
        .zip(answers)
        .map(|(probe, answer)| decode_ok(&probe.path, &answer?))
        .collect()
}

fn decode_ok(path: &str, response: &Response) -> Result<Value> {
    if response.status != crate::StatusCode::OK {
        return Err(crate::refusal(Method::GET, path, response));
    }
    crate::decode(Method::GET, path, response)
}
