//! `/metrics`: the Prometheus text exposition (format 0.0.4), written by the
//! `prometheus-client` crate.
//!
//! Two kinds of series:
//!
//! - **Counted as requests go by** ([`Metrics`], one per application, in
//!   [`crate::Config::metrics`]): requests by method, route template and status, with
//!   a latency histogram by method and route; allocation writes and pending claims
//!   accepted and refused, by status and error code. Every label comes from a bounded
//!   set: a route *template* (never a raw path), a status, an error code of
//!   [`crate::error::ErrorCode`]. The request middleware ([`crate::request_log::log`])
//!   records them.
//! - **Read at scrape time** ([`Snapshot`]): what the view holds, encoded straight from
//!   it (the view is in memory, so a scrape costs no query): openstack-exporter's
//!   Placement series with its names, labels and meaning (`openstack_placement_up`,
//!   `openstack_placement_resource_{total,allocation_ratio,reserved,usage}` by
//!   `hostname`, the provider's name, and `resourcetype`), so that dashboards and
//!   alerts made for it keep working, while the cloud has at most
//!   [`crate::Settings::metrics_providers`] providers (four series per inventory are
//!   more than a scrape should carry past that); the same four summed by class at
//!   any size (`allot_resource_*`); the build's version and the store's engine and
//!   schema; allot's own counts (providers, consumers, pending claims and what they
//!   hold by class, server groups and how broken they are by policy, open drains);
//!   the view's lag behind the store; how long the start took to load
//!   the view and from where ([`allot_store::Loaded`]); the named shapes' last
//!   counts, made in the background ([`shapes`]);
//!   the writer's commit batch sizes, commit latency and store errors
//!   ([`allot_store::WriterStats`]); and the process collector's series (resident
//!   memory, CPU, open files), read from `/proc`.
//!
//! Who may scrape: on the API's port, a token the `allot:metrics` rule allows (the
//! admin role, or a `metrics` role for a scraper's own user); on the listener of
//! `--metrics-bind`, anyone who can reach it ([`router`]), for a scraper on a private
//! network. The encoding runs on the blocking pool: at flat 10,000 roots it writes
//! some 100,000 series; past the bound, a few hundred.

mod shapes;

pub use shapes::{count as count_shapes, ShapeCounter, DEFAULT_SHAPE_COUNTS_INTERVAL};

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use allot_core::{State, Timestamp};
use axum::extract::State as AppData;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::context::Ctx;
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::policy::{authorize, Action};
use crate::AppState;

/// Where the metrics are served.
pub const PATH: &str = "/metrics";

/// The default of [`crate::Settings::metrics_providers`]: openstack-exporter's series
/// per provider and class are written for clouds of up to this many providers. At
/// flat 10,000 roots they are 100,000 series (8.4 MB, 20 ms a scrape); at a million
/// they were ten million (860 MB, 4.5 s of CPU a scrape and as much memory for the
/// text), more than a Prometheus should take from one target every 30 seconds.
pub const DEFAULT_PROVIDER_SERIES: usize = 20_000;

/// The content type of the text exposition format 0.0.4.
const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// A request's labels.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: &'static str,
    route: String,
    status: u16,
}

/// A latency histogram's labels.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    method: &'static str,
    route: String,
}

/// An allocation write's or pending claim's outcome.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClaimLabels {
    /// `allocations` (Placement's writes) or `pending` (`POST /claims`).
    kind: &'static str,
    /// `accepted` or `refused`.
    outcome: &'static str,
    status: u16,
    /// The error code of a refusal (empty when accepted).
    code: &'static str,
}

/// The series counted as requests go by (see the module doc). Cloning shares them.
#[derive(Debug, Clone)]
pub struct Metrics {
    requests: Family<RequestLabels, Counter>,
    durations: Family<RouteLabels, Histogram, fn() -> Histogram>,
    claims: Family<ClaimLabels, Counter>,
    /// Allocation candidate searches cut short by `--max-allocation-candidates` or the
    /// search's step budget.
    cut_short: Counter,
    overall: Arc<Overall>,
    /// The latest refusals, newest last (the web UI's "refused recently").
    recent: Arc<std::sync::Mutex<std::collections::VecDeque<Refusal>>>,
    /// When the application started (for `/status`'s rates).
    started: Instant,
    /// The named shapes' last counts ([`shapes`]).
    shapes: ShapeCounter,
}

/// How many refusals [`Metrics::recent_refusals`] keeps.
pub const RECENT_REFUSALS: usize = 100;

/// One refused allocation write or pending claim, as the counters saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// When, in seconds since the epoch.
    pub at: i64,
    /// `allocations` (Placement's writes) or `pending` (`POST /claims`).
    pub kind: &'static str,
    /// The answer's status.
    pub status: u16,
    /// Its error code (`placement.concurrent_update`, ...; `undefined` if none).
    pub code: &'static str,
}

/// The latency histograms' bucket bounds, in seconds: 250 µs to about 8 s.
fn latency_bounds() -> impl Iterator<Item = f64> {
    exponential_buckets(0.00025, 2.0, LATENCY_BUCKETS)
}

/// How many finite bounds [`latency_bounds`] gives.
const LATENCY_BUCKETS: u16 = 16;

impl Default for Metrics {
    fn default() -> Self {
        fn latency() -> Histogram {
            Histogram::new(latency_bounds())
        }
        Metrics {
            requests: Family::default(),
            durations: Family::new_with_constructor(latency),
            claims: Family::default(),
            cut_short: Counter::default(),
            overall: Arc::default(),
            recent: Arc::default(),
            started: Instant::now(),
            shapes: ShapeCounter::default(),
        }
    }
}

/// Every request's latency in the latency buckets, and the claims' outcomes, summed
/// over every label: what `/status` reports since the start (the families keep their
/// counts to themselves).
#[derive(Debug, Default)]
struct Overall {
    /// Requests by the first latency bound they are under; the last is over them all.
    buckets: [AtomicU64; LATENCY_BUCKETS as usize + 1],
    claims_accepted: AtomicU64,
    claims_refused: AtomicU64,
}

impl Overall {
    fn observe(&self, seconds: f64) {
        let i = latency_bounds()
            .position(|bound| seconds <= bound)
            .unwrap_or(LATENCY_BUCKETS as usize);
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Requests in all, and the `q` quantile of their latency in seconds, estimated
    /// as Prometheus' `histogram_quantile` does: linearly within the bucket it falls
    /// in, and the highest finite bound when it falls above them all.
    fn quantile(&self, q: f64) -> (u64, Option<f64>) {
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return (0, None);
        }
        let bounds: Vec<f64> = latency_bounds().collect();
        let rank = q * total as f64;
        let mut below = 0u64;
        for (i, &n) in counts.iter().enumerate() {
            if (below + n) as f64 >= rank && n > 0 {
                let Some(&upper) = bounds.get(i) else {
                    return (total, bounds.last().copied());
                };
                let lower = if i == 0 { 0.0 } else { bounds[i - 1] };
                let within = (rank - below as f64) / n as f64;
                return (total, Some(lower + (upper - lower) * within));
            }
            below += n;
        }
        (total, bounds.last().copied())
    }
}

/// What `/status` takes from the metrics.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Totals {
    /// Requests answered since the start.
    pub requests: u64,
    /// Their latency's 99th percentile, in seconds (None before the first).
    pub p99_seconds: Option<f64>,
    /// Allocation writes and pending claims answered 2xx.
    pub claims_accepted: u64,
    /// And refused.
    pub claims_refused: u64,
    /// Seconds since the start.
    pub uptime_seconds: f64,
}

impl Metrics {
    /// Counts one request. `route` is the matched template (None: no route matched,
    /// or the request was refused before routing); `code` the error code of an error
    /// answer.
    pub fn record(
        &self,
        method: &axum::http::Method,
        route: Option<&str>,
        status: StatusCode,
        code: Option<ErrorCode>,
        seconds: f64,
    ) {
        let method = method_label(method);
        let route = route.unwrap_or("unmatched");
        self.requests
            .get_or_create(&RequestLabels {
                method,
                route: route.to_owned(),
                status: status.as_u16(),
            })
            .inc();
        self.durations
            .get_or_create(&RouteLabels {
                method,
                route: route.to_owned(),
            })
            .observe(seconds);
        self.overall.observe(seconds);
        if let Some(kind) = claim_kind(method, route) {
            let accepted = status.is_success();
            let tally = if accepted {
                &self.overall.claims_accepted
            } else {
                &self.overall.claims_refused
            };
            tally.fetch_add(1, Ordering::Relaxed);
            if !accepted {
                let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
                if recent.len() == RECENT_REFUSALS {
                    recent.pop_front();
                }
                recent.push_back(Refusal {
                    at: crate::auth::now_unix(),
                    kind,
                    status: status.as_u16(),
                    code: code.unwrap_or_default().as_str(),
                });
            }
            self.claims
                .get_or_create(&ClaimLabels {
                    kind,
                    outcome: if accepted { "accepted" } else { "refused" },
                    status: status.as_u16(),
                    code: match (accepted, code) {
                        (true, _) => "",
                        (false, code) => code.unwrap_or_default().as_str(),
                    },
                })
                .inc();
        }
    }

    /// The latest refused allocation writes and pending claims (at most
    /// [`RECENT_REFUSALS`]), newest first.
    pub fn recent_refusals(&self) -> Vec<Refusal> {
        let recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        recent.iter().rev().cloned().collect()
    }

    /// The totals since the start, for `/status`.
    pub fn totals(&self) -> Totals {
        let (requests, p99_seconds) = self.overall.quantile(0.99);
        Totals {
            requests,
            p99_seconds,
            claims_accepted: self.overall.claims_accepted.load(Ordering::Relaxed),
            claims_refused: self.overall.claims_refused.load(Ordering::Relaxed),
            uptime_seconds: self.started.elapsed().as_secs_f64(),
        }
    }

    /// Registers the counted series in `registry`.
    fn register(&self, registry: &mut Registry) {
        registry.register(
            "allot_http_requests",
            "HTTP requests answered, by method, route template and status",
            self.requests.clone(),
        );
        registry.register(
            "allot_http_request_duration_seconds",
            "Time from a request's arrival to its answer, by method and route template",
            self.durations.clone(),
        );
        registry.register(
            "allot_claims",
            "Allocation writes (kind=allocations) and pending claims (kind=pending) \
             accepted and refused, by status and error code",
            self.claims.clone(),
        );
        registry.register(
            "allot_candidates_cut_short",
            "Allocation candidate searches stopped by --max-allocation-candidates or the \
             search's step budget before every root was explored",
            self.cut_short.clone(),
        );
    }

    /// Counts a search of allocation candidates cut short.
    pub fn search_cut_short(&self) {
        self.cut_short.inc();
    }
}

/// A method as a label: the ones the API has, else `other` (a bounded set).
fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// Whether a request is a claim on capacity, and of which kind: the writes that
/// place allocations, and the pending claims (allot's extension).
fn claim_kind(method: &str, route: &str) -> Option<&'static str> {
    match (method, route) {
        ("PUT", "/allocations/{consumer_uuid}") | ("POST", "/allocations") => Some("allocations"),
        ("POST", "/claims") => Some("pending"),
        _ => None,
    }
}

/// The route on the API's port: a token the `allot:metrics` rule allows.
pub async fn scrape(ctx: Ctx, AppData(app): AppData<AppState>) -> ApiResult {
    authorize(&ctx, app.config.settings.policy, Action::MetricsShow)?;
    exposition(app).await
}

/// The router of `--metrics-bind`'s listener: `/metrics` with no token, and nothing
/// else (404).
pub fn router(state: AppState) -> Router {
    Router::new()
        .route(
            PATH,
            get(|AppData(app): AppData<AppState>| async move {
                exposition(app)
                    .await
                    .unwrap_or_else(IntoResponse::into_response)
            }),
        )
        .with_state(state)
}

/// Encodes every series, on the blocking pool.
async fn exposition(app: AppState) -> ApiResult {
    let body = tokio::task::spawn_blocking(move || encode(&app))
        .await
        .map_err(|join| {
            tracing::error!(error = %join, "encoding the metrics failed");
            ApiError::internal()
        })?
        .map_err(|e| {
            tracing::error!(error = %e, "encoding the metrics failed");
            ApiError::internal()
        })?;
    let mut response = (StatusCode::OK, body).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    Ok(response)
}

/// The whole exposition: the counted series and a [`Snapshot`] of the view.
pub fn encode(app: &AppState) -> Result<String, std::fmt::Error> {
    let mut registry = Registry::default();
    app.config.metrics.register(&mut registry);
    app.config.forwarding.register(&mut registry);
    app.config.connections.register(&mut registry);
    registry.register_collector(Box::new(Snapshot {
        provider_series: app.config.settings.metrics_providers,
        view: app.host.read(),
        now: app.host.now(),
        staleness: app.host.staleness().as_secs_f64(),
        writer: app.host.stats().clone(),
        uptime: app.config.metrics.started.elapsed().as_secs_f64(),
        store: app.host.store_kind(),
        loaded: app.host.loaded(),
        shapes: app.config.metrics.shapes.read(app),
    }));
    let mut out = String::new();
    prometheus_client::encoding::prometheus_text::encode(&mut out, &registry)?;
    Ok(out)
}

/// The series read at scrape time (see the module doc).
#[derive(Debug)]
struct Snapshot {
    /// The most providers for which the series per provider are written.
    provider_series: usize,
    view: Arc<State>,
    now: Timestamp,
    staleness: f64,
    writer: allot_store::WriterStats,
    uptime: f64,
    store: allot_store::StoreKind,
    loaded: allot_store::Loaded,
    shapes: shapes::Read,
}

/// Writes one gauge family whose series are `(labels, value)`.
fn gauges<'a, L, V>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (L, V)>,
) -> Result<(), std::fmt::Error>
where
    L: EncodeLabelSet + 'a,
    V: prometheus_client::encoding::EncodeGaugeValue + std::fmt::Debug + Send + Sync,
{
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in series {
        ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

/// Writes one unlabelled gauge.
fn gauge<V>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: V,
) -> Result<(), std::fmt::Error>
where
    V: prometheus_client::encoding::EncodeGaugeValue + std::fmt::Debug + Send + Sync,
{
    let metric = ConstGauge::new(value);
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

/// A sum as a gauge's `i64`, at its largest if it does not fit.
fn saturated(sum: u64) -> i64 {
    i64::try_from(sum).unwrap_or(i64::MAX)
}

/// One resource class's inventories and usage, summed over providers.
#[derive(Debug, Default)]
struct ClassSums {
    total: u64,
    reserved: u64,
    capacity: i64,
    usage: u64,
}

impl Snapshot {
    /// openstack-exporter's Placement series, one per provider and class.
    fn provider_series(&self, e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let view = &self.view;
        let inventories = || {
            view.providers().flat_map(|p| {
                p.inventories
                    .iter()
                    .map(move |(class, inv)| (p, class, inv))
            })
        };
        gauges(
            e,
            "openstack_placement_resource_total",
            "Inventory total of a resource class on a provider (hostname: its name)",
            inventories().map(|(p, class, inv)| (labels_of(p, class), inv.total as i64)),
        )?;
        gauges(
            e,
            "openstack_placement_resource_allocation_ratio",
            "Allocation ratio of a resource class on a provider",
            inventories().map(|(p, class, inv)| (labels_of(p, class), inv.allocation_ratio)),
        )?;
        gauges(
            e,
            "openstack_placement_resource_reserved",
            "Reserved amount of a resource class on a provider",
            inventories().map(|(p, class, inv)| (labels_of(p, class), inv.reserved as i64)),
        )?;
        gauges(
            e,
            "openstack_placement_resource_usage",
            "What allocations use of a resource class on a provider (its /usages)",
            inventories()
                .map(|(p, class, _)| (labels_of(p, class), view.usage(p.id(), class) as i64)),
        )?;
        Ok(())
    }
}

impl Collector for Snapshot {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let e = &mut encoder;
        // openstack-exporter's Placement series: same names, labels and meaning.
        gauge(e, "openstack_placement_up", "Placement API is up (1)", 1i64)?;
        // allot's own counts, as `/status` gives them: the providers' number also
        // decides whether the series per provider are written.
        let counts = crate::status::counts(&self.view, self.now);
        let per_provider = counts.providers <= self.provider_series as u64;
        gauge(
            e,
            "allot_metrics_provider_series",
            "Whether the series per provider and class are written (1), or left out for \
             the cloud's size (0; --metrics-providers)",
            i64::from(per_provider),
        )?;
        class_series(e, &class_sums(&self.view))?;
        if per_provider {
            self.provider_series(e)?;
        }
        self.build_series(e)?;
        self.count_series(e, &counts)?;
        self.view_series(e)?;
        shapes::series(e, &self.shapes)?;
        writer_series(e, &self.writer)?;
        if let Some(c) = &self.writer.checkpoints {
            checkpoint_series(e, c)?;
        }
        if let Some(v) = &self.writer.view_saves {
            view_save_series(e, v)?;
        }
        process(e)
    }
}

impl Snapshot {
    /// What is running, on what: the build's version, and the store's engine and
    /// schema.
    fn build_series(&self, e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        gauges(
            e,
            "allot_build_info",
            "The allot build serving (1)",
            [([("version", env!("CARGO_PKG_VERSION"))], 1i64)],
        )?;
        let schema = self.store.schema.to_string();
        gauges(
            e,
            "allot_store_info",
            "The store: its engine, schema version, and whether other nodes write to it (1)",
            [(
                [
                    ("engine", self.store.engine),
                    ("schema", schema.as_str()),
                    ("shared", if self.store.shared { "true" } else { "false" }),
                ],
                1i64,
            )],
        )
    }

    /// allot's own counts: providers, consumers, pending claims and what they hold by
    /// class.
    fn count_series(
        &self,
        e: &mut DescriptorEncoder,
        counts: &allot_client::status::Counts,
    ) -> Result<(), std::fmt::Error> {
        gauge(e, "allot_providers", "Resource providers", counts.providers)?;
        gauge(
            e,
            "allot_consumers",
            "Consumers holding allocations",
            counts.consumers,
        )?;
        gauge(
            e,
            "allot_claims_pending",
            "Pending claims that count against capacity now",
            counts.claims_pending,
        )?;
        let pending = self.view.pending_totals(None, None, self.now);
        gauges(
            e,
            "allot_pending",
            "What live pending claims hold, by resource class (summed over providers)",
            pending
                .iter()
                .map(|(class, amount)| ([("resourcetype", class.as_str())], *amount as i64)),
        )?;
        self.group_series(e)
    }

    /// Server groups by policy, how broken they are now, and the open drains
    /// (issue 44).
    fn group_series(&self, e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut by_policy: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
        for g in self.view.server_groups() {
            let broken = self.view.group_broken(&g.rule(), &g.members, self.now);
            let entry = by_policy.entry(g.policy.as_str()).or_default();
            entry.0 += 1;
            entry.1 = entry.1.saturating_add(broken.min(i64::MAX as u64) as i64);
        }
        gauges(
            e,
            "allot_server_groups",
            "Server groups, by policy",
            by_policy.iter().map(|(p, (n, _))| ([("policy", *p)], *n)),
        )?;
        gauges(
            e,
            "allot_server_group_violations",
            "How broken the server groups' rules are now, added up by policy (0: every \
             rule holds; see docs/api.md, \"Server groups\")",
            by_policy
                .iter()
                .map(|(p, (_, broken))| ([("policy", *p)], *broken)),
        )?;
        // A drain holds its roots until it is deleted, confirmed or not.
        let open = self.view.drains().count();
        gauge(
            e,
            "allot_drains_open",
            "Drains not yet deleted (their roots take nothing new from allot)",
            open as i64,
        )
    }

    /// The view itself: how far it may lag behind the store, how long the server has
    /// run, and how long the start took to load it and from where.
    fn view_series(&self, e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        gauge(
            e,
            "allot_view_staleness_seconds",
            "How long this node's view may lag behind the store (0 on a store no other \
             node writes)",
            self.staleness,
        )?;
        gauge(
            e,
            "allot_uptime_seconds",
            "Seconds since the server started",
            self.uptime,
        )?;
        let source = if self.loaded.from_saved_view {
            "saved"
        } else {
            "tables"
        };
        gauges(
            e,
            "allot_view_load_seconds",
            "Seconds the start took to load the view, from the view saved at the last \
             stop or from the tables",
            [([("source", source)], self.loaded.seconds)],
        )
    }
}

/// One pass over the view for the sums by class.
fn class_sums(view: &State) -> BTreeMap<&str, ClassSums> {
    let mut classes: BTreeMap<&str, ClassSums> = BTreeMap::new();
    for p in view.providers() {
        for (class, inv) in p.inventories.iter() {
            let sums = classes.entry(class.as_str()).or_default();
            sums.total = sums.total.saturating_add(inv.total);
            sums.reserved = sums.reserved.saturating_add(inv.reserved);
            sums.capacity = sums.capacity.saturating_add(inv.reported_capacity());
            sums.usage = sums.usage.saturating_add(view.usage(p.id(), class));
        }
    }
    classes
}

/// The four openstack-exporter series summed by class (`allot_resource_*`), written
/// at any size.
fn class_series(
    e: &mut DescriptorEncoder,
    classes: &BTreeMap<&str, ClassSums>,
) -> Result<(), std::fmt::Error> {
    for (name, help, value) in [
        (
            "allot_resource_total",
            "Inventory totals of a resource class, summed over providers",
            (|s: &ClassSums| saturated(s.total)) as fn(&ClassSums) -> i64,
        ),
        (
            "allot_resource_reserved",
            "Reserved amounts of a resource class, summed over providers",
            |s| saturated(s.reserved),
        ),
        (
            "allot_resource_capacity",
            "Capacities ((total - reserved) * allocation_ratio, as Placement reports \
             each) of a resource class, summed over providers",
            |s| s.capacity,
        ),
        (
            "allot_resource_usage",
            "What allocations use of a resource class, summed over providers",
            |s| saturated(s.usage),
        ),
    ] {
        gauges(
            e,
            name,
            help,
            classes
                .iter()
                .map(|(class, sums)| ([("resourcetype", *class)], value(sums))),
        )?;
    }
    Ok(())
}

/// The writer's commits: batch sizes, commit latency, where its time goes, and the
/// store's errors.
fn writer_series(
    e: &mut DescriptorEncoder,
    w: &allot_store::WriterStats,
) -> Result<(), std::fmt::Error> {
    w.batch_size.encode(e.encode_descriptor(
        "allot_commit_batch_size",
        "Writes committed together in one store transaction",
        None,
        MetricType::Histogram,
    )?)?;
    w.commit_seconds.encode(e.encode_descriptor(
        "allot_commit_duration_seconds",
        "Time a commit took in the store (statements, change log, commit and fsync; \
         not the planning)",
        None,
        MetricType::Histogram,
    )?)?;
    let mut busy = e.encode_descriptor(
        "allot_writer_busy_seconds",
        "Seconds the writer thread spent in each part of its commits: planning \
         against the view, the store's transaction and fsync, publishing and \
         answering, freeing what the new view replaced",
        None,
        MetricType::Counter,
    )?;
    for (phase, seconds) in [
        ("plan", &w.busy.plan),
        ("store", &w.busy.store),
        ("answer", &w.busy.answer),
        ("free", &w.busy.free),
    ] {
        seconds.encode(busy.encode_family(&[("phase", phase)])?)?;
    }
    by_kind(
        e,
        "allot_writer_write_seconds",
        "Seconds the writer spent planning and applying writes of each kind (part of \
         the plan phase): the time one write of the kind holds every other write",
        &w.busy,
        |k| &k.seconds,
    )?;
    by_kind(
        e,
        "allot_writer_writes",
        "Writes of each kind the writer planned (refused ones included)",
        &w.busy,
        |k| &k.writes,
    )?;
    w.store_errors.encode(e.encode_descriptor(
        "allot_store_errors",
        "Store operations that failed (commits, reads of other nodes' commits)",
        None,
        MetricType::Counter,
    )?)
}

/// One counter family of the writer's share by kind of write (`kind` label).
fn by_kind<M: EncodeMetric>(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    busy: &allot_store::WriterBusy,
    metric: impl Fn(&allot_store::KindBusy) -> &M,
) -> Result<(), std::fmt::Error> {
    let mut family = e.encode_descriptor(name, help, None, MetricType::Counter)?;
    for kind in allot_store::WriteKind::ALL {
        metric(busy.of(kind)).encode(family.encode_family(&[("kind", kind.as_str())])?)?;
    }
    Ok(())
}

/// SQLite's checkpoints: beside the commit path, and the writer's share.
fn checkpoint_series(
    e: &mut DescriptorEncoder,
    c: &allot_store::CheckpointStats,
) -> Result<(), std::fmt::Error> {
    c.wal_bytes.encode(e.encode_descriptor(
        "allot_sqlite_wal_bytes",
        "Size of the SQLite write-ahead log file after the last commit",
        None,
        MetricType::Gauge,
    )?)?;
    c.passes.encode(e.encode_descriptor(
        "allot_sqlite_checkpoint_passes",
        "Checkpoints run beside the commit path by the checkpointer thread",
        None,
        MetricType::Counter,
    )?)?;
    c.writer_seconds.encode(e.encode_descriptor(
        "allot_sqlite_writer_checkpoint_seconds",
        "Checkpoints the writer ran itself, in the commit path (to start the WAL \
         over, or at its hard bound)",
        None,
        MetricType::Histogram,
    )?)
}

/// The views saved while running (SQLite), for a start after a crash.
fn view_save_series(
    e: &mut DescriptorEncoder,
    v: &allot_store::ViewSaveStats,
) -> Result<(), std::fmt::Error> {
    let mut saves = e.encode_descriptor(
        "allot_view_saves",
        "Views saved beside the SQLite file while the server runs, for a start \
         after a crash: written whole (outcome=saved) or failed (outcome=failed)",
        None,
        MetricType::Counter,
    )?;
    for (outcome, count) in [("saved", &v.saved), ("failed", &v.failed)] {
        count.encode(saves.encode_family(&[("outcome", outcome)])?)?;
    }
    v.seconds.encode(e.encode_descriptor(
        "allot_view_save_duration_seconds",
        "How long each save of the view while the server runs took, on its own \
         thread",
        None,
        MetricType::Histogram,
    )?)
}

/// The labels of a provider's class, as openstack-exporter names them.
fn labels_of<'a>(
    p: &'a allot_core::Provider,
    class: &'a allot_core::ResourceClass,
) -> [(&'static str, &'a str); 2] {
    [
        ("hostname", p.row.name.as_str()),
        ("resourcetype", class.as_str()),
    ]
}

/// The process collector's series, as every Prometheus client library names them.
#[cfg(target_os = "linux")]
fn process(e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    use procfs::process::Process;
    let Ok(me) = Process::myself() else {
        return Ok(());
    };
    if let Ok(stat) = me.stat() {
        let ticks = procfs::ticks_per_second() as f64;
        let cpu = ConstCounter::new((stat.utime + stat.stime) as f64 / ticks);
        cpu.encode(e.encode_descriptor(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds",
            None,
            MetricType::Counter,
        )?)?;
        gauge(
            e,
            "process_resident_memory_bytes",
            "Resident memory size in bytes",
            stat.rss * procfs::page_size(),
        )?;
        gauge(
            e,
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes",
            stat.vsize,
        )?;
        if let Ok(boot) = procfs::boot_time_secs() {
            gauge(
                e,
                "process_start_time_seconds",
                "Start time of the process since the Unix epoch in seconds",
                boot as f64 + stat.starttime as f64 / ticks,
            )?;
        }
    }
    if let Ok(open) = me.fd_count() {
        gauge(
            e,
            "process_open_fds",
            "Number of open file descriptors",
            open as i64,
        )?;
    }
    if let Ok(limits) = me.limits() {
        if let procfs::process::LimitValue::Value(max) = limits.max_open_files.soft_limit {
            gauge(
                e,
                "process_max_fds",
                "Maximum number of open file descriptors",
                max,
            )?;
        }
    }
    Ok(())
}

/// No process series where there is no `/proc`.
#[cfg(not(target_os = "linux"))]
fn process(_: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_overall_quantile_interpolates_as_prometheus_does() {
        let overall = Overall::default();
        assert_eq!(overall.quantile(0.99), (0, None));
        // 100 requests of 0.3 ms: all in the second bucket (0.25 to 0.5 ms).
        for _ in 0..100 {
            overall.observe(0.0003);
        }
        let (n, p99) = overall.quantile(0.99);
        assert_eq!(n, 100);
        let p99 = p99.unwrap();
        assert!((p99 - (0.00025 + 0.00025 * 0.99)).abs() < 1e-12, "{p99}");
        // One slow request past every bound: the p99 stays in the fast bucket, the
        // maximum is reported as the highest bound.
        overall.observe(100.0);
        assert!(overall.quantile(0.99).1.unwrap() < 0.0005);
        assert_eq!(overall.quantile(1.0).1, latency_bounds().last());
    }
}
