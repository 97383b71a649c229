//! A small async client for the OpenStack Placement HTTP API.
//!
//! It speaks only the public API (by default at microversion 1.39, with the token in
//! `x-auth-token`), so the same caller runs against allot and against OpenStack
//! Placement alike: that is what the benchmark tool (`allot bench`) needs to seed the
//! same workload into both and time them side by side.
//!
//! Transport is hyper 1 through hyper-util's pooled client (HTTP/1.1, keep-alive): both
//! are already built for the server, so the client adds next to nothing to the build.
//! Plain `http://` only; a TLS endpoint is out of scope for a loopback benchmark.
//!
//! The typed methods cover what seeding, querying and reading usages back need;
//! [`Client::request`] is the way out for anything else. A refusal becomes [`Error::Status`] with the HTTP status,
//! Placement's error `code` and `detail` (from its error envelope) when the body has
//! them, so callers can branch on "409, already exists" without parsing text.
//!
//! allot's extensions (resource class metadata; pending claims and their totals, in
//! `claims`; `docs/api.md`) have typed calls too; against OpenStack Placement they
//! answer 404 like any unknown URL.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};
/// The request methods and statuses the client's signatures use.
pub use hyper::{Method, StatusCode};
use hyper::{Request, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::{connect::HttpConnector, Client as HyperClient};
use hyper_util::rt::TokioExecutor;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use uuid::Uuid;

mod claims;
pub mod consumers;
pub mod drains;
pub mod dry_run;
mod headroom;
pub mod server_groups;
pub mod shapes;
pub mod status;
pub mod survey;
mod usages;

pub use claims::{
    Claim, ClaimExpiry, ClaimFilter, ClaimList, ClaimResources, ClaimState, NewClaim,
    PendingByRoot, PickClaim, Placed, ProviderPending, SoftRuleBroken,
};
pub use headroom::{Explanation, GroupExplanation, Headroom, Miss, Stage};
pub use status::Status;
pub use usages::ProjectUsages;

/// How to reach a Placement endpoint.
#[derive(Debug, Clone)]
pub struct Config {
    /// The endpoint's base URL, e.g. `http://127.0.0.1:8778` (a path prefix such as
    /// `/placement` is kept).
    pub url: String,
    /// The header the token goes in (`x-auth-token` for Keystone and noauth2).
    pub token_header: String,
    /// The token (`admin` for allot's default policy and Placement's noauth2).
    pub token: String,
    /// The microversion sent in `openstack-api-version: placement X`.
    pub microversion: String,
    /// For an `https://` URL: whom to trust. The default is the system's roots, which
    /// `SSL_CERT_FILE` replaces, as for OpenSSL and curl.
    pub tls: allot_tls::ClientTls,
}

impl Config {
    /// An endpoint with the defaults: `x-auth-token: admin`, microversion 1.39, the
    /// system's roots.
    pub fn new(url: impl Into<String>) -> Config {
        Config {
            url: url.into(),
            token_header: "x-auth-token".into(),
            token: "admin".into(),
            microversion: "1.39".into(),
            tls: allot_tls::ClientTls::default(),
        }
    }
}

/// What can go wrong with a call.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration cannot be used (bad URL, header name or value).
    #[error("bad client configuration: {0}")]
    Config(String),
    /// The request never got an answer (connection refused, reset, timeout).
    #[error("{method} {path}: {message}")]
    Transport {
        /// The request's method.
        method: Method,
        /// The request's path and query.
        path: String,
        /// What the transport said.
        message: String,
    },
    /// The server answered with a status the caller did not expect.
    #[error("{method} {path}: {status}{}{}", code.as_ref().map(|c| format!(" ({c})")).unwrap_or_default(), detail.as_ref().map(|d| format!(": {d}")).unwrap_or_default())]
    Status {
        /// The request's method.
        method: Method,
        /// The request's path and query.
        path: String,
        /// The HTTP status.
        status: StatusCode,
        /// Placement's error code (`placement.concurrent_update`, ...), when given.
        code: Option<String>,
        /// Placement's error detail, or the start of the body when it is no envelope.
        detail: Option<String>,
    },
    /// The answer was not the JSON the caller expected.
    #[error("{method} {path}: unexpected body: {message}")]
    Decode {
        /// The request's method.
        method: Method,
        /// The request's path and query.
        path: String,
        /// What did not fit.
        message: String,
    },
}

impl Error {
    /// The HTTP status of a refusal, if this is one.
    pub fn status(&self) -> Option<StatusCode> {
        match self {
            Error::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// A shorthand for this crate's results.
pub type Result<T> = std::result::Result<T, Error>;

/// A response read in full.
#[derive(Debug, Clone)]
pub struct Response {
    /// The HTTP status.
    pub status: StatusCode,
    /// The whole body.
    pub body: Bytes,
}

/// One inventory record, as `PUT .../inventories` takes it. Fields left `None` take
/// the server's defaults.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Inventory {
    /// Total amount.
    pub total: u64,
    /// Amount held back from allocation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reserved: Option<u64>,
    /// Largest single allocation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_unit: Option<u64>,
    /// Overcommit factor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocation_ratio: Option<f64>,
}

impl Inventory {
    /// An inventory of `total` with every other field at its default.
    pub fn total(total: u64) -> Inventory {
        Inventory {
            total,
            reserved: None,
            max_unit: None,
            allocation_ratio: None,
        }
    }
}

/// A cheap, cloneable handle on one endpoint; clones share the connection pool.
#[derive(Clone)]
pub struct Client {
    http: HyperClient<HttpsConnector<HttpConnector>, Full<Bytes>>,
    base: String,
    token_header: HeaderName,
    token: HeaderValue,
    version: HeaderValue,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token stays out of logs.
        f.debug_struct("Client").field("base", &self.base).finish()
    }
}

impl Client {
    /// A client for the endpoint `config` describes. Needs a running tokio runtime
    /// when requests are made, not when it is built.
    pub fn new(config: &Config) -> Result<Client> {
        let base = config.url.trim_end_matches('/').to_owned();
        let uri: Uri = base
            .parse()
            .map_err(|e| Error::Config(format!("url {:?}: {e}", config.url)))?;
        let https = uri.scheme_str() == Some("https");
        if !(https || uri.scheme_str() == Some("http")) || uri.host().is_none() {
            return Err(Error::Config(format!(
                "url {:?}: only http[s]://host[:port][/prefix] is supported",
                config.url
            )));
        }
        // Built (and its files read) for https:// only.
        let tls = match https {
            true => config
                .tls
                .config()
                .map_err(|e| Error::Config(format!("TLS: {e}")))?,
            false => allot_tls::trusting_no_one(),
        };
        let token_header = HeaderName::from_bytes(config.token_header.as_bytes())
            .map_err(|e| Error::Config(format!("token header: {e}")))?;
        let mut token = HeaderValue::from_str(&config.token)
            .map_err(|e| Error::Config(format!("token: {e}")))?;
        token.set_sensitive(true);
        let version = HeaderValue::from_str(&format!("placement {}", config.microversion))
            .map_err(|e| Error::Config(format!("microversion: {e}")))?;
        let mut connector = HttpConnector::new();
        // Small requests back to back: Nagle would add 40 ms to some of them.
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(Duration::from_secs(10)));
        connector.enforce_http(false);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(connector);
        let http = HyperClient::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector);
        Ok(Client {
            http,
            base,
            token_header,
            token,
            version,
        })
    }

    /// The base URL (without a trailing slash).
    pub fn base(&self) -> &str {
        &self.base
    }

    /// One request; `path` starts with `/` and may carry a query. Returns whatever
    /// status came back, with the body read in full.
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Response> {
        self.request_with(method, path, body, self.version.clone())
            .await
    }

    /// `GET path` at `microversion` instead of the client's own, whatever status
    /// comes back (what `allot verify` asks at several microversions).
    pub async fn get_at(&self, path: &str, microversion: &str) -> Result<Response> {
        let version = HeaderValue::from_str(&format!("placement {microversion}"))
            .map_err(|e| Error::Config(format!("microversion: {e}")))?;
        self.request_with(Method::GET, path, None, version).await
    }

    async fn request_with(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        version: HeaderValue,
    ) -> Result<Response> {
        let transport = |message: String| Error::Transport {
            method: method.clone(),
            path: path.to_owned(),
            message,
        };
        let mut builder = Request::builder()
            .method(method.clone())
            .uri(format!("{}{}", self.base, path))
            .header(ACCEPT, "application/json")
            .header(&self.token_header, self.token.clone())
            .header("openstack-api-version", version);
        let payload = match body {
            Some(body) => {
                builder = builder.header(CONTENT_TYPE, "application/json");
                Bytes::from(serde_json::to_vec(body).expect("a Value always serialises"))
            }
            None => Bytes::new(),
        };
        let request = builder
            .body(Full::new(payload))
            .map_err(|e| transport(format!("building the request: {e}")))?;
        let response = self
            .http
            .request(request)
            .await
            .map_err(|e| transport(error_chain(&e)))?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| transport(format!("reading the body: {e}")))?
            .to_bytes();
        Ok(Response { status, body })
    }

    /// A request whose status must be one of `ok`; anything else is [`Error::Status`].
    async fn expect(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        ok: &[StatusCode],
    ) -> Result<Response> {
        let response = self.request(method.clone(), path, body).await?;
        if ok.contains(&response.status) {
            Ok(response)
        } else {
            Err(refusal(method, path, &response))
        }
    }

    /// A request expecting 200 with a JSON body, returned parsed.
    async fn json(&self, method: Method, path: &str, body: Option<&Value>) -> Result<Value> {
        let response = self
            .expect(method.clone(), path, body, &[StatusCode::OK])
            .await?;
        decode(method, path, &response)
    }

    /// `POST /resource_providers`. `Ok(true)` when created, `Ok(false)` when a
    /// provider with that uuid or name already exists (409), so seeding can resume.
    pub async fn create_provider(
        &self,
        uuid: Uuid,
        name: &str,
        parent: Option<Uuid>,
    ) -> Result<bool> {
        let mut body = json!({"uuid": uuid, "name": name});
        if let Some(parent) = parent {
            body["parent_provider_uuid"] = json!(parent);
        }
        let response = self
            .expect(
                Method::POST,
                "/resource_providers",
                Some(&body),
                &[StatusCode::OK, StatusCode::CREATED, StatusCode::CONFLICT],
            )
            .await?;
        Ok(response.status != StatusCode::CONFLICT)
    }

    /// `GET /resource_providers/{uuid}`: the provider's generation, or `None` when it
    /// does not exist.
    pub async fn provider_generation(&self, uuid: Uuid) -> Result<Option<u64>> {
        let path = format!("/resource_providers/{uuid}");
        let response = self
            .expect(
                Method::GET,
                &path,
                None,
                &[StatusCode::OK, StatusCode::NOT_FOUND],
            )
            .await?;
        if response.status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let value: Value = decode(Method::GET, &path, &response)?;
        generation_of(Method::GET, &path, &value).map(Some)
    }

    /// `GET /resource_providers/{uuid}/inventories`: (generation, the inventories
    /// object as the server wrote it).
    pub async fn inventories(&self, uuid: Uuid) -> Result<(u64, Value)> {
        let path = format!("/resource_providers/{uuid}/inventories");
        let value = self.json(Method::GET, &path, None).await?;
        let generation = generation_of(Method::GET, &path, &value)?;
        Ok((generation, value["inventories"].clone()))
    }

    /// `PUT /resource_providers/{uuid}/inventories`; returns the new generation.
    pub async fn put_inventories<'a>(
        &self,
        uuid: Uuid,
        generation: u64,
        inventories: impl IntoIterator<Item = (&'a str, &'a Inventory)>,
    ) -> Result<u64> {
        let inventories: serde_json::Map<String, Value> = inventories
            .into_iter()
            .map(|(class, inv)| {
                (
                    class.to_owned(),
                    serde_json::to_value(inv).expect("serialisable"),
                )
            })
            .collect();
        let body = json!({"resource_provider_generation": generation, "inventories": inventories});
        let path = format!("/resource_providers/{uuid}/inventories");
        let value = self.json(Method::PUT, &path, Some(&body)).await?;
        generation_of(Method::PUT, &path, &value)
    }

    /// `GET /resource_providers/{uuid}/traits`: (generation, trait names).
    pub async fn traits(&self, uuid: Uuid) -> Result<(u64, Vec<String>)> {
        self.provider_names(uuid, "traits").await
    }

    /// `PUT /resource_providers/{uuid}/traits`; returns the new generation.
    pub async fn put_traits(&self, uuid: Uuid, generation: u64, traits: &[&str]) -> Result<u64> {
        self.put_provider_names(uuid, "traits", generation, json!(traits))
            .await
    }

    /// `GET /resource_providers/{uuid}/aggregates` (1.19+): (generation, aggregate uuids
    /// as written).
    pub async fn aggregates(&self, uuid: Uuid) -> Result<(u64, Vec<String>)> {
        self.provider_names(uuid, "aggregates").await
    }

    /// `PUT /resource_providers/{uuid}/aggregates` (1.19+); returns the new generation.
    pub async fn put_aggregates(
        &self,
        uuid: Uuid,
        generation: u64,
        aggregates: &[Uuid],
    ) -> Result<u64> {
        self.put_provider_names(uuid, "aggregates", generation, json!(aggregates))
            .await
    }

    /// A provider's traits or aggregates (`list` names both the sub-resource and its
    /// key in the body, as Placement spells them alike): (generation, the names).
    async fn provider_names(&self, uuid: Uuid, list: &str) -> Result<(u64, Vec<String>)> {
        let path = format!("/resource_providers/{uuid}/{list}");
        let value = self.json(Method::GET, &path, None).await?;
        Ok((
            generation_of(Method::GET, &path, &value)?,
            strings(&value[list]),
        ))
    }

    /// Replaces a provider's traits or aggregates with `names` at `generation`;
    /// returns the new generation.
    async fn put_provider_names(
        &self,
        uuid: Uuid,
        list: &str,
        generation: u64,
        names: Value,
    ) -> Result<u64> {
        let body = json!({"resource_provider_generation": generation, list: names});
        let path = format!("/resource_providers/{uuid}/{list}");
        let value = self.json(Method::PUT, &path, Some(&body)).await?;
        generation_of(Method::PUT, &path, &value)
    }

    /// `PUT /traits/{name}`: makes sure a custom trait exists (201 or 204).
    pub async fn ensure_trait(&self, name: &str) -> Result<()> {
        self.ensure(&format!("/traits/{name}")).await
    }

    /// `PUT /resource_classes/{name}` (1.7+): makes sure a custom class exists.
    pub async fn ensure_class(&self, name: &str) -> Result<()> {
        self.ensure(&format!("/resource_classes/{name}")).await
    }

    /// A bodiless `PUT` that creates what `path` names or finds it there (201 or 204).
    async fn ensure(&self, path: &str) -> Result<()> {
        self.expect(
            Method::PUT,
            path,
            None,
            &[StatusCode::CREATED, StatusCode::NO_CONTENT],
        )
        .await
        .map(drop)
    }

    /// `GET /allocations/{consumer}`: the consumer's allocations object (empty when
    /// it holds nothing).
    pub async fn allocations(&self, consumer: Uuid) -> Result<Value> {
        let path = format!("/allocations/{consumer}");
        Ok(self.json(Method::GET, &path, None).await?["allocations"].clone())
    }

    /// `PUT /allocations/{consumer}` with `body` as given (1.39 wants
    /// `allocations`, `project_id`, `user_id`, `consumer_generation`, `consumer_type`).
    /// Expects 204; a refusal (409 capacity or generation, 400) is [`Error::Status`].
    pub async fn put_allocations(&self, consumer: Uuid, body: &Value) -> Result<()> {
        let path = format!("/allocations/{consumer}");
        self.expect(Method::PUT, &path, Some(body), &[StatusCode::NO_CONTENT])
            .await
            .map(drop)
    }

    /// `GET /allocation_candidates?{query}`: the raw answer, whatever its status, so a
    /// benchmark can time exactly the request and decide what to parse.
    pub async fn allocation_candidates(&self, query: &str) -> Result<Response> {
        self.request(
            Method::GET,
            &format!("/allocation_candidates?{query}"),
            None,
        )
        .await
    }
}

/// A resource class's metadata, an allot extension: `GET`/`PUT
/// /resource_classes/{name}/metadata`. Unset fields are `None` (`null` on the wire).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassMetadata {
    /// What one unit is (`count`, `MiB`, `GiB`, `kbit/s`, ...).
    pub units: Option<String>,
    /// A name for people.
    pub display_name: Option<String>,
    /// One line on what the class counts.
    pub description: Option<String>,
}

/// One entry of `GET /resource_classes` (links left out).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ResourceClass {
    /// The class's name.
    pub name: String,
    /// Its metadata, when the list was asked for it (`with_metadata=true`, allot only).
    #[serde(default)]
    pub metadata: Option<ClassMetadata>,
}

#[derive(Deserialize)]
struct ResourceClassList {
    resource_classes: Vec<ResourceClass>,
}

impl Client {
    /// A request expecting 200 with a JSON body of type `T`.
    async fn typed<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<T> {
        let value = self.json(method.clone(), path, body).await?;
        serde_json::from_value(value).map_err(|e| Error::Decode {
            method,
            path: path.to_owned(),
            message: e.to_string(),
        })
    }

    /// `GET /resource_classes` (1.2+), with each class's metadata when
    /// `with_metadata` (an allot extension).
    pub async fn resource_classes(&self, with_metadata: bool) -> Result<Vec<ResourceClass>> {
        let path = if with_metadata {
            "/resource_classes?with_metadata=true"
        } else {
            "/resource_classes"
        };
        let list: ResourceClassList = self.typed(Method::GET, path, None).await?;
        Ok(list.resource_classes)
    }

    /// `GET /resource_classes/{name}/metadata` (allot): a class's metadata.
    pub async fn class_metadata(&self, name: &str) -> Result<ClassMetadata> {
        let path = format!("/resource_classes/{}/metadata", path_segment(name));
        self.typed(Method::GET, &path, None).await
    }

    /// `PUT /resource_classes/{name}/metadata` (allot): replaces a custom class's
    /// metadata; returns it as stored.
    pub async fn set_class_metadata(
        &self,
        name: &str,
        metadata: &ClassMetadata,
    ) -> Result<ClassMetadata> {
        let path = format!("/resource_classes/{}/metadata", path_segment(name));
        let body = serde_json::to_value(metadata).expect("metadata always serialises");
        self.typed(Method::PUT, &path, Some(&body)).await
    }
}

/// `text` as one path segment: anything but unreserved characters percent-encoded, so
/// that a name typed by a person makes a valid URL (and the server's 404).
pub(crate) fn path_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The [`Error::Status`] for an unexpected answer, with Placement's code and detail
/// when the body is its error envelope (`{"errors": [{"code", "detail", ...}]}`).
fn refusal(method: Method, path: &str, response: &Response) -> Error {
    let envelope = serde_json::from_slice::<Value>(&response.body).ok();
    let first = envelope.as_ref().map(|v| &v["errors"][0]);
    let code = first.and_then(|e| e["code"].as_str()).map(str::to_owned);
    let detail = first
        .and_then(|e| e["detail"].as_str())
        .map(|d| d.trim().to_owned())
        .or_else(|| {
            // No envelope (a proxy's page, a trivial endpoint): the start of the text.
            let text = String::from_utf8_lossy(&response.body);
            let text = text.trim();
            (!text.is_empty()).then(|| text.chars().take(200).collect())
        });
    Error::Status {
        method,
        path: path.to_owned(),
        status: response.status,
        code,
        detail,
    }
}

fn decode(method: Method, path: &str, response: &Response) -> Result<Value> {
    serde_json::from_slice(&response.body).map_err(|e| Error::Decode {
        method,
        path: path.to_owned(),
        message: e.to_string(),
    })
}

fn generation_of(method: Method, path: &str, value: &Value) -> Result<u64> {
    value
        .get("resource_provider_generation")
        .or_else(|| value.get("generation"))
        .and_then(Value::as_u64)
        .ok_or_else(|| Error::Decode {
            method,
            path: path.to_owned(),
            message: "no generation".into(),
        })
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The transport error with its causes (hyper's top-level message alone is just
/// "client error (Connect)").
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A stub server: answers one request per connection (`connection: close`) with
    /// each of `responses` in turn, and hands back the requests' text.
    pub(crate) async fn stub(
        responses: Vec<(&'static str, String)>,
    ) -> (String, tokio::task::JoinHandle<Vec<String>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let mut requests = Vec::new();
            for (status, body) in responses {
                let (mut socket, _) = listener.accept().await.unwrap();
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    let n = socket.read(&mut buf).await.unwrap();
                    seen.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&seen).to_string();
                    if let Some((head, body)) = text.split_once("\r\n\r\n") {
                        let length = head
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse::<usize>().unwrap())
                            })
                            .unwrap_or(0);
                        if body.len() >= length {
                            break;
                        }
                    }
                    if n == 0 {
                        break;
                    }
                }
                let response = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\n\
                     connection: close\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                socket.write_all(response.as_bytes()).await.unwrap();
                socket.shutdown().await.unwrap();
                requests.push(String::from_utf8(seen).unwrap());
            }
            requests
        });
        (url, task)
    }

    /// A one-shot HTTP server: answers one request and hands back its text.
    async fn one_shot(
        status: &'static str,
        body: &'static str,
    ) -> (String, tokio::task::JoinHandle<String>) {
        let (url, task) = stub(vec![(status, body.to_owned())]).await;
        (
            url,
            tokio::spawn(async move { task.await.unwrap().remove(0) }),
        )
    }

    #[tokio::test]
    async fn sends_token_microversion_and_json() {
        let (url, server) = one_shot(
            "200 OK",
            r#"{"resource_provider_generation": 3, "traits": ["HW_CPU_X"]}"#,
        )
        .await;
        let mut config = Config::new(format!("{url}/"));
        config.token_header = "x-bench-token".into();
        config.token = "s3cret".into();
        let client = Client::new(&config).unwrap();
        let uuid = Uuid::nil();
        let generation = client.put_traits(uuid, 2, &["HW_CPU_X"]).await.unwrap();
        assert_eq!(generation, 3);
        let request = server.await.unwrap();
        assert!(
            request.starts_with(&format!("PUT /resource_providers/{uuid}/traits HTTP/1.1")),
            "{request}"
        );
        assert!(request.contains("x-bench-token: s3cret"), "{request}");
        assert!(
            request.contains("openstack-api-version: placement 1.39"),
            "{request}"
        );
        assert!(
            request.contains("content-type: application/json"),
            "{request}"
        );
        assert!(
            request.ends_with(r#"{"resource_provider_generation":2,"traits":["HW_CPU_X"]}"#),
            "{request}"
        );
    }

    #[tokio::test]
    async fn refusal_carries_status_code_and_detail() {
        let (url, _server) = one_shot(
            "409 Conflict",
            r#"{"errors": [{"status": 409, "title": "Conflict", "code": "placement.concurrent_update", "detail": " stale "}]}"#,
        )
        .await;
        let client = Client::new(&Config::new(url)).unwrap();
        let error = client
            .put_aggregates(Uuid::nil(), 0, &[])
            .await
            .unwrap_err();
        match &error {
            Error::Status {
                status,
                code,
                detail,
                ..
            } => {
                assert_eq!(*status, StatusCode::CONFLICT);
                assert_eq!(code.as_deref(), Some("placement.concurrent_update"));
                assert_eq!(detail.as_deref(), Some("stale"));
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert_eq!(error.status(), Some(StatusCode::CONFLICT));
        assert!(error.to_string().contains("409"), "{error}");
    }

    #[tokio::test]
    async fn class_metadata_is_typed_both_ways() {
        let (url, server) = one_shot(
            "200 OK",
            r#"{"description": null, "display_name": "Widgets", "units": "count"}"#,
        )
        .await;
        let client = Client::new(&Config::new(url)).unwrap();
        let wanted = ClassMetadata {
            units: Some("count".into()),
            display_name: Some("Widgets".into()),
            description: None,
        };
        let got = client
            .set_class_metadata("CUSTOM_W", &wanted)
            .await
            .unwrap();
        assert_eq!(got, wanted);
        let request = server.await.unwrap();
        assert!(
            request.starts_with("PUT /resource_classes/CUSTOM_W/metadata "),
            "{request}"
        );
        assert!(
            request.ends_with(r#"{"units":"count","display_name":"Widgets","description":null}"#),
            "{request}"
        );
    }

    #[tokio::test]
    async fn the_class_list_reads_metadata_when_there_is_some() {
        let (url, server) = one_shot(
            "200 OK",
            r#"{"resource_classes": [{"links": [], "name": "VCPU", "metadata": {"units": "count", "display_name": null, "description": null}}, {"links": [], "name": "CUSTOM_A"}]}"#,
        )
        .await;
        let client = Client::new(&Config::new(url)).unwrap();
        let list = client.resource_classes(true).await.unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(
            list[0].metadata.as_ref().unwrap().units.as_deref(),
            Some("count")
        );
        assert_eq!(list[1].metadata, None);
        let request = server.await.unwrap();
        assert!(
            request.starts_with("GET /resource_classes?with_metadata=true "),
            "{request}"
        );
        assert_eq!(path_segment("not a/class"), "not%20a%2Fclass");
    }

    #[tokio::test]
    async fn create_provider_treats_409_as_exists() {
        let (url, server) = one_shot("409 Conflict", "").await;
        let client = Client::new(&Config::new(url)).unwrap();
        let parent = Uuid::from_u128(7);
        assert!(!client
            .create_provider(Uuid::from_u128(1), "cn1", Some(parent))
            .await
            .unwrap());
        let request = server.await.unwrap();
        assert!(
            request.contains(&format!("\"parent_provider_uuid\":\"{parent}\"")),
            "{request}"
        );
    }

    #[tokio::test]
    async fn connection_refused_is_a_transport_error() {
        // Bind then drop: the port is (almost certainly) closed now.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let client = Client::new(&Config::new(format!("http://127.0.0.1:{port}"))).unwrap();
        let error = client.ensure_trait("CUSTOM_X").await.unwrap_err();
        assert!(matches!(error, Error::Transport { .. }), "{error:?}");
    }

    #[test]
    fn bad_configuration_is_refused() {
        assert!(matches!(
            Client::new(&Config::new("ftp://x")),
            Err(Error::Config(_))
        ));
        // https:// reads its CA file when the client is made: a missing one is named.
        let mut config = Config::new("https://x");
        config.tls.roots = allot_tls::Roots::File("/nonexistent/ca.pem".into());
        let e = Client::new(&config).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/ca.pem"), "{e}");
        assert!(matches!(
            Client::new(&Config::new("not a url")),
            Err(Error::Config(_))
        ));
        let mut config = Config::new("http://127.0.0.1:1");
        config.token_header = "bad header".into();
        assert!(matches!(Client::new(&config), Err(Error::Config(_))));
    }

    #[test]
    fn inventory_leaves_defaults_out() {
        let inv = Inventory {
            reserved: Some(50),
            ..Inventory::total(2000)
        };
        assert_eq!(
            serde_json::to_value(&inv).unwrap(),
            json!({"total": 2000, "reserved": 50})
        );
    }
}
