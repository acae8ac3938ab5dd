//! The OpenAPI 3.1 document of the web service, generated from the handlers' annotations: served at
//! `/loadmgr/v1/openapi.json`, printed by `loadmgr openapi`, committed as `docs/openapi.json`.

use utoipa::OpenApi;

use super::errors::ErrorBody;

/// The OpenAPI document of the web service.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "loadmgr broker web service",
        description = "Pulsar's lookup and load-balancing admin REST API, Prometheus metrics, health, and loadmgr's own endpoints. Errors are `{\"reason\": ...}`."
    ),
    paths(
        super::lookup::lookup,
        super::lookup::partitions,
        super::brokers::list,
        super::brokers::list_in,
        super::brokers::leader,
        super::brokers::owned_namespaces,
        super::brokers::health,
        super::brokers::ready,
        super::brokers::dynamic_keys,
        super::brokers::dynamic_values,
        super::brokers::runtime_values,
        super::brokers::set_dynamic,
        super::brokers::delete_dynamic,
        super::brokers::load_report,
        super::namespaces::create,
        super::namespaces::bundles,
        super::namespaces::unload_namespace,
        super::namespaces::unload_bundle,
        super::namespaces::split_bundle,
        super::own::status,
        super::own::brokers,
        super::own::namespace,
        super::own::plan,
        super::own::assignments,
        super::recent::cluster,
        super::recent::history,
        super::recent::moves,
        super::recent::rings,
        openapi,
        super::metrics::metrics,
    ),
    components(schemas(ErrorBody)),
    tags(
        (name = "lookup", description = "where a topic is served"),
        (name = "brokers", description = "registered brokers, the leader, health"),
        (name = "configuration", description = "Pulsar's dynamic configuration"),
        (name = "namespaces", description = "bundles, unloads, splits"),
        (name = "loadmgr", description = "loadmgr's own"),
        (name = "metrics", description = "Prometheus")
    )
)]
pub struct ApiDoc;

/// The OpenAPI document as JSON (pretty-printed, as committed in `docs/openapi.json`).
pub fn openapi_json() -> String {
    ApiDoc::openapi()
        .to_pretty_json()
        .expect("the OpenAPI document serialises")
}

/// This document.
#[utoipa::path(get, path = "/loadmgr/v1/openapi.json", responses(
    (status = 200, description = "OpenAPI 3.1 document", body = Object)), tag = "loadmgr")]
pub(crate) async fn openapi() -> ([(axum::http::HeaderName, &'static str); 1], String) {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        openapi_json(),
    )
}
