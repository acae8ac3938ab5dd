//! The broker's web service: Pulsar's lookup and load-balancing admin REST API, Prometheus metrics and health
//! checks, loadmgr's own status endpoints and its OpenAPI document, on `webServicePort` and (with rustls)
//! `webServicePortTls`, bound to `bindAddress`.
//!
//! # Contract
//!
//! * [`WebService::start`] binds every configured port before it returns (a port in use is an error naming it)
//!   and serves until [`WebService::shutdown`] or until it is dropped.
//! * Every error is a status with a JSON body `{"reason": ...}` ([`errors::ApiError`]); an unknown path is a
//!   404, a known path with another method a 405, a body over 64 KiB a 413.
//! * Authentication and authorization follow [`auth`].
//! * Lookups are answered from the watched [`ClusterView`] when the bundle is owned; an unowned bundle is placed
//!   by the leader: this broker's leader task when it leads, else the leader reached over HTTP (the request is
//!   forwarded with the client's `Authorization` header and its answer returned; see [`lookup`]).
//!
//! # Files
//!
//! | file | concern |
//! |---|---|
//! | `mod.rs` | the state, the router, listening and TLS accept loops |
//! | `errors.rs` | `{"reason"}` errors and their statuses |
//! | `extract.rs` | path and query extractors whose rejections are such errors |
//! | `auth.rs` | tokens, roles, which endpoint needs what |
//! | `tls.rs` | rustls server configuration; the client that reaches other brokers |
//! | `lookup.rs` | `/lookup/v2/topic/...`, partitioned-topic metadata |
//! | `brokers.rs` | `/admin/v2/brokers/...`, `/admin/v2/broker-stats/load-report` |
//! | `namespaces.rs` | `/admin/v2/namespaces/...` |
//! | `own.rs` | `/loadmgr/v1/...`: leader status, the live plan, assignment records |
//! | `recent.rs` | `/loadmgr/v1/{cluster,history,moves,rings}`: what the dashboard shows |
//! | `dashboard.rs` | `/dashboard`: the page, its script and style sheet (`dashboard/`) |
//! | `openapi.rs` | the OpenAPI document of all of them |
//! | `metrics.rs` | `/metrics` |

pub mod auth;
mod brokers;
mod dashboard;
pub mod errors;
mod extract;
mod lookup;
mod metrics;
mod namespaces;
pub mod openapi;
mod own;
mod recent;
mod tls;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::routing::{get, post, put};
use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use self::auth::Auth;
use self::errors::ApiError;
use super::agent::BrokerAgent;
use super::shared::AgentShared;
use super::view::ClusterView;
use super::RuntimeError;
use crate::config::Settings;

/// Largest request body accepted.
const BODY_LIMIT: usize = 64 * 1024;

/// What every handler reaches.
#[derive(Clone)]
pub(crate) struct AppState {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) sh: Arc<AgentShared>,
    pub(crate) view: ClusterView,
    pub(crate) auth: Auth,
    /// Reaches other brokers (the leader, for a lookup).
    pub(crate) client: reqwest::Client,
    /// How long a lookup may wait for an owner.
    pub(crate) lookup_timeout: Duration,
}

impl std::ops::Deref for AppState {
    type Target = Inner;

    fn deref(&self) -> &Inner {
        &self.inner
    }
}

impl AppState {
    /// Whether this broker's leader task runs (it leads).
    pub(crate) fn leads(&self) -> bool {
        self.sh.local_requests.lock().unwrap().is_some()
    }

    /// The effective settings.
    pub(crate) fn settings(&self) -> Settings {
        self.sh.settings()
    }
}

/// The running web service; see the module docs.
#[derive(Debug)]
pub struct WebService {
    addresses: Vec<SocketAddr>,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for WebService {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// The routes, over `state`.
pub(crate) fn router(state: AppState) -> Router {
    Router::new()
        .route(
            "/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}",
            get(lookup::lookup),
        )
        .route(
            "/admin/v2/{domain}/{tenant}/{namespace}/{topic}/partitions",
            get(lookup::partitions),
        )
        .route("/admin/v2/brokers", get(brokers::list))
        .route("/admin/v2/brokers/leaderBroker", get(brokers::leader))
        .route("/admin/v2/brokers/health", get(brokers::health))
        .route("/admin/v2/brokers/ready", get(brokers::ready))
        .route(
            "/admin/v2/brokers/configuration",
            get(brokers::dynamic_keys),
        )
        .route(
            "/admin/v2/brokers/configuration/values",
            get(brokers::dynamic_values),
        )
        .route(
            "/admin/v2/brokers/configuration/runtime",
            get(brokers::runtime_values),
        )
        .route(
            "/admin/v2/brokers/configuration/{name}/{value}",
            post(brokers::set_dynamic),
        )
        .route(
            "/admin/v2/brokers/configuration/{name}",
            axum::routing::delete(brokers::delete_dynamic),
        )
        .route("/admin/v2/brokers/{cluster}", get(brokers::list_in))
        .route(
            "/admin/v2/brokers/{cluster}/{broker}/ownedNamespaces",
            get(brokers::owned_namespaces),
        )
        .route(
            "/admin/v2/broker-stats/load-report",
            get(brokers::load_report),
        )
        .route(
            "/admin/v2/namespaces/{tenant}/{namespace}",
            put(namespaces::create),
        )
        .route(
            "/admin/v2/namespaces/{tenant}/{namespace}/bundles",
            get(namespaces::bundles),
        )
        .route(
            "/admin/v2/namespaces/{tenant}/{namespace}/unload",
            put(namespaces::unload_namespace),
        )
        .route(
            "/admin/v2/namespaces/{tenant}/{namespace}/{bundle}/unload",
            put(namespaces::unload_bundle),
        )
        .route(
            "/admin/v2/namespaces/{tenant}/{namespace}/{bundle}/split",
            put(namespaces::split_bundle),
        )
        .route("/loadmgr/v1/status", get(own::status))
        .route("/loadmgr/v1/brokers", get(own::brokers))
        .route(
            "/loadmgr/v1/namespaces/{tenant}/{namespace}",
            get(own::namespace),
        )
        .route("/loadmgr/v1/plan", get(own::plan))
        .route("/loadmgr/v1/assignments", get(own::assignments))
        .route("/loadmgr/v1/cluster", get(recent::cluster))
        .route("/loadmgr/v1/history", get(recent::history))
        .route("/loadmgr/v1/moves", get(recent::moves))
        .route("/loadmgr/v1/rings", get(recent::rings))
        .route("/loadmgr/v1/openapi.json", get(openapi::openapi))
        .route("/", get(dashboard::root))
        .route("/dashboard", get(dashboard::index))
        .route("/dashboard/app.js", get(dashboard::script))
        .route("/dashboard/style.css", get(dashboard::style))
        .route("/dashboard/auth.json", get(dashboard::auth_info))
        .route("/metrics", get(metrics::metrics))
        .fallback(|| async { ApiError::not_found("no such path") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "this path does not take this method",
            )
        })
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(state)
}

/// How long a starting web service retries the first read of its cluster view while the store is briefly
/// unreachable.
const VIEW_START_PATIENCE: Duration = Duration::from_secs(30);

/// The cluster view, its first read retried on a transient store failure (a broker started while its store
/// restarts or elects) for [`VIEW_START_PATIENCE`] ([`crate::store::retry_transient`]); anything else fails at
/// once.
async fn start_view(store: &crate::store::DynStore) -> Result<ClusterView, RuntimeError> {
    let view = crate::store::retry_transient(
        "read the cluster view for the web service",
        VIEW_START_PATIENCE,
        || ClusterView::start(store.clone()),
    )
    .await?;
    Ok(view)
}

impl WebService {
    /// Starts the web service of `agent` with `settings` (`bindAddress`, `webServicePort`,
    /// `webServicePortTls` with `tlsCertificateFilePath` and `tlsKeyFilePath`, `tlsTrustCertsFilePath`, the
    /// authentication keys). Errors ([`RuntimeError::Config`]) name the key or the address that is wrong.
    pub async fn start(
        agent: &BrokerAgent,
        settings: &Settings,
    ) -> Result<WebService, RuntimeError> {
        let config = |e: String| RuntimeError::Config(e);
        let auth = Auth::from_settings(settings).map_err(config)?;
        let client = tls::http_client(
            settings
                .tls_trust_certs_file_path
                .as_deref()
                .map(std::path::Path::new),
        )
        .map_err(config)?;
        let tls_config = match (
            settings.web_service_port_tls,
            &settings.tls_certificate_file_path,
            &settings.tls_key_file_path,
        ) {
            (Some(_), Some(cert), Some(key)) => Some(
                tls::server_config(std::path::Path::new(cert), std::path::Path::new(key))
                    .map_err(config)?,
            ),
            (Some(_), _, _) => {
                return Err(config(
                    "webServicePortTls needs tlsCertificateFilePath and tlsKeyFilePath".into(),
                ))
            }
            _ => None,
        };
        let sh = agent.shared();
        let view = start_view(&sh.store).await?;
        let state = AppState {
            inner: Arc::new(Inner {
                sh,
                view,
                auth,
                client,
                lookup_timeout: Duration::from_millis(
                    settings.metadata_store_operation_timeout_seconds.max(1) as u64 * 1000,
                ),
            }),
        };
        let app = router(state);
        let (stop, stopped) = watch::channel(false);
        let mut addresses = Vec::new();
        let mut tasks = Vec::new();
        let bind = |port: i32| format!("{}:{port}", settings.bind_address);
        if let Some(port) = settings.web_service_port {
            let listener = TcpListener::bind(bind(port)).await.map_err(|e| {
                config(format!(
                    "webServicePort: cannot listen on {}: {e}",
                    bind(port)
                ))
            })?;
            addresses.push(listener.local_addr().map_err(|e| config(e.to_string()))?);
            let app = app.clone();
            let mut stopped = stopped.clone();
            tasks.push(tokio::spawn(async move {
                let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
                    let _ = stopped.wait_for(|s| *s).await;
                });
                if let Err(e) = serve.await {
                    tracing::error!("web service: {e}");
                }
            }));
        }
        if let (Some(port), Some(tls)) = (settings.web_service_port_tls, tls_config) {
            let listener = TcpListener::bind(bind(port)).await.map_err(|e| {
                config(format!(
                    "webServicePortTls: cannot listen on {}: {e}",
                    bind(port)
                ))
            })?;
            addresses.push(listener.local_addr().map_err(|e| config(e.to_string()))?);
            tasks.push(tokio::spawn(serve_tls(listener, tls, app, stopped)));
        }
        Ok(WebService {
            addresses,
            stop,
            tasks,
        })
    }

    /// The bound addresses: the HTTP one first, then the HTTPS one (as configured).
    pub fn addresses(&self) -> &[SocketAddr] {
        &self.addresses
    }

    /// Stops accepting connections and lets the requests in progress finish (at most 5 s).
    pub async fn shutdown(mut self) {
        self.stop.send_replace(true);
        for t in self.tasks.drain(..) {
            let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
        }
    }
}

/// Accepts TLS connections and serves `app` on each, until `stopped`.
async fn serve_tls(
    listener: TcpListener,
    config: Arc<tokio_rustls::rustls::ServerConfig>,
    app: Router,
    mut stopped: watch::Receiver<bool>,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!("web service (TLS): accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stopped.changed() => return,
        };
        let acceptor = acceptor.clone();
        let app = app.clone();
        tokio::spawn(async move {
            let stream = match tokio::time::timeout(
                Duration::from_secs(10),
                acceptor.accept(stream),
            )
            .await
            {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    tracing::debug!(%peer, "web service (TLS): handshake failed: {e}");
                    return;
                }
                Err(_) => return,
            };
            let service = hyper_util::service::TowerToHyperService::new(app);
            let builder =
                hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
            if let Err(e) = builder
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(%peer, "web service (TLS): {e}");
            }
        });
    }
}
