//! `allot bench seed`: creates a shape's providers, inventories, traits, aggregates and
//! load through the API, `--concurrency` units at a time.
//!
//! Resumable: a provider that already exists (409 on create) is checked instead of
//! created, and only what differs from the shape is rewritten; a consumer that already
//! holds allocations is left alone. A second run over a complete shape creates
//! nothing, so an interrupted seed of a large shape is finished by running it again.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use allot_client::Client;
use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{json, Value};

use super::shapes::{ConsumerSpec, ProviderSpec, Shape, Unit, PROJECT, USER};
use super::Endpoint;

/// `allot bench seed`.
#[derive(clap::Args, Debug)]
pub struct SeedArgs {
    /// The workload.
    #[arg(long, value_enum)]
    shape: Shape,
    /// Number of root providers.
    #[arg(long)]
    roots: usize,
    #[command(flatten)]
    endpoint: Endpoint,
    /// Units (a root with its subtree and load) seeded at the same time.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..))]
    concurrency: u16,
}

/// What a run did, counted across workers.
#[derive(Default)]
struct Tally {
    providers_created: AtomicUsize,
    providers_existing: AtomicUsize,
    consumers_created: AtomicUsize,
    consumers_existing: AtomicUsize,
}

pub async fn seed(args: SeedArgs) -> anyhow::Result<()> {
    let endpoint = &args.endpoint;
    let client = endpoint.client(&endpoint.url, &endpoint.token)?;
    let started = Instant::now();
    for name in args.shape.custom_traits() {
        client
            .ensure_trait(name)
            .await
            .with_context(|| format!("creating trait {name}"))?;
    }
    let shape = args.shape;
    let roots = args.roots;
    let units = shape.units(roots);
    // indicatif hides a bar drawn to stderr when stderr is not a terminal.
    let bar = ProgressBar::with_draw_target(Some(units as u64), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(
            "{bar:40} {pos}/{len} units, {per_sec}, {elapsed_precise} elapsed, {eta} left",
        )
        .expect("a valid template"),
    );
    let tally = Arc::new(Tally::default());
    let next = Arc::new(AtomicUsize::new(0));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..args.concurrency.min(units.max(1) as u16) {
        let (client, tally, next, bar) = (client.clone(), tally.clone(), next.clone(), bar.clone());
        workers.spawn(async move {
            loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= units {
                    return anyhow::Ok(());
                }
                let unit = shape.unit(roots, index);
                seed_unit(&client, &unit, &tally)
                    .await
                    .with_context(|| format!("seeding {}", unit.providers[0].name))?;
                bar.inc(1);
            }
        });
    }
    while let Some(result) = workers.join_next().await {
        if let Err(error) = result.context("a seeding task panicked").and_then(|r| r) {
            workers.abort_all();
            bar.abandon();
            return Err(error);
        }
    }
    bar.finish_and_clear();
    let wall = started.elapsed().as_secs_f64();
    let count = |a: &AtomicUsize| a.load(Ordering::Relaxed);
    println!(
        "seed: shape={} roots={} providers_created={} providers_existing={} \
         consumers_created={} consumers_existing={} wall_s={wall:.2}",
        shape.name(),
        roots,
        count(&tally.providers_created),
        count(&tally.providers_existing),
        count(&tally.consumers_created),
        count(&tally.consumers_existing),
    );
    Ok(())
}

/// One unit: its providers in order (parents first), then its consumers.
async fn seed_unit(client: &Client, unit: &Unit, tally: &Tally) -> anyhow::Result<()> {
    let mut all_new = true;
    for provider in &unit.providers {
        let created = seed_provider(client, provider)
            .await
            .with_context(|| format!("provider {}", provider.name))?;
        let counter = if created {
            &tally.providers_created
        } else {
            all_new = false;
            &tally.providers_existing
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
    for consumer in &unit.consumers {
        // On a provider created just now no consumer can hold anything yet; otherwise
        // a consumer that already holds allocations was seeded by an earlier run.
        if !all_new && has_allocations(client, consumer).await? {
            tally.consumers_existing.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let resources: serde_json::Map<String, Value> = consumer
            .resources
            .iter()
            .map(|(class, amount)| ((*class).to_owned(), json!(amount)))
            .collect();
        let body = json!({
            "allocations": {consumer.provider.to_string(): {"resources": resources}},
            "project_id": PROJECT,
            "user_id": USER,
            "consumer_generation": null,
            "consumer_type": "INSTANCE",
        });
        client
            .put_allocations(consumer.uuid, &body)
            .await
            .with_context(|| format!("consumer {}", consumer.name))?;
        tally.consumers_created.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

async fn has_allocations(client: &Client, consumer: &ConsumerSpec) -> anyhow::Result<bool> {
    let allocations = client.allocations(consumer.uuid).await?;
    Ok(allocations.as_object().is_some_and(|a| !a.is_empty()))
}

/// Creates one provider with its inventories, traits and aggregates; `Ok(false)` when
/// it was already there (then whatever differs from the shape is rewritten).
async fn seed_provider(client: &Client, p: &ProviderSpec) -> anyhow::Result<bool> {
    let inventories = || p.inventories.iter().map(|(class, inv)| (*class, inv));
    if client.create_provider(p.uuid, &p.name, p.parent).await? {
        // A new provider starts at generation 0 on both servers.
        let mut generation = 0;
        if !p.inventories.is_empty() {
            generation = client
                .put_inventories(p.uuid, generation, inventories())
                .await?;
        }
        if !p.traits.is_empty() {
            generation = client.put_traits(p.uuid, generation, &p.traits).await?;
        }
        if !p.aggregates.is_empty() {
            client
                .put_aggregates(p.uuid, generation, &p.aggregates)
                .await?;
        }
        return Ok(true);
    }
    let (generation, current) = client.inventories(p.uuid).await?;
    if !inventories_match(p, &current) {
        client
            .put_inventories(p.uuid, generation, inventories())
            .await?;
    }
    let (generation, mut traits) = client.traits(p.uuid).await?;
    let mut wanted: Vec<String> = p.traits.iter().map(|t| (*t).to_owned()).collect();
    traits.sort();
    wanted.sort();
    if traits != wanted {
        client.put_traits(p.uuid, generation, &p.traits).await?;
    }
    let (generation, mut aggregates) = client.aggregates(p.uuid).await?;
    let mut wanted: Vec<String> = p.aggregates.iter().map(|a| a.to_string()).collect();
    aggregates.sort();
    wanted.sort();
    if aggregates != wanted {
        client
            .put_aggregates(p.uuid, generation, &p.aggregates)
            .await?;
    }
    Ok(false)
}

/// Whether the server's inventories have the shape's classes with the shape's
/// totals, reserved amounts, max units and ratios (those the shape sets).
fn inventories_match(p: &ProviderSpec, current: &Value) -> bool {
    let Some(current) = current.as_object() else {
        return false;
    };
    current.len() == p.inventories.len()
        && p.inventories.iter().all(|(class, want)| {
            let have = &current[*class];
            have["total"].as_u64() == Some(want.total)
                && have["reserved"].as_u64().unwrap_or(0) == want.reserved.unwrap_or(0)
                && want
                    .max_unit
                    .is_none_or(|m| have["max_unit"].as_u64() == Some(m))
                && want
                    .allocation_ratio
                    .is_none_or(|r| have["allocation_ratio"].as_f64() == Some(r))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inventories_match_compares_what_the_shape_sets() {
        let p = Shape::Flat.unit(1, 0).providers.remove(0);
        let server = json!({
            "VCPU": {"total": 64, "reserved": 0, "max_unit": 64, "allocation_ratio": 4.0, "min_unit": 1, "step_size": 1},
            "MEMORY_MB": {"total": 262144, "reserved": 4096, "max_unit": 262144, "allocation_ratio": 1.0},
            "DISK_GB": {"total": 2000, "reserved": 50, "max_unit": 2000, "allocation_ratio": 1.0},
        });
        assert!(inventories_match(&p, &server));
        let mut short = server.clone();
        short.as_object_mut().unwrap().remove("DISK_GB");
        assert!(!inventories_match(&p, &short));
        let mut other_ratio = server.clone();
        other_ratio["VCPU"]["allocation_ratio"] = json!(16.0);
        assert!(!inventories_match(&p, &other_ratio));
        assert!(!inventories_match(&p, &json!({})));
    }
}
