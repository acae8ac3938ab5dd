//! Path and query extractors that refuse malformed input as [`ApiError`]s — a JSON `{"reason"}` like every
//! other refusal — instead of axum's plain-text rejections.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::errors::ApiError;

/// The request's path parameters, as [`axum::extract::Path`] reads them.
pub(crate) struct Path<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for Path<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| Path(p.0))
            .map_err(|e| ApiError::new(e.status(), format!("path: {}", e.body_text())))
    }
}

/// The request's query string, as [`axum::extract::Query`] reads it.
pub(crate) struct Query<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| Query(q.0))
            .map_err(|e| ApiError::bad_request(format!("query: {}", e.body_text())))
    }
}

/// A `tenant/namespace` given as a parameter, or a 400 saying why it is not one.
pub(crate) fn namespace_param(text: &str) -> Result<crate::bundle::NamespaceName, ApiError> {
    crate::bundle::NamespaceName::parse(text)
        .map_err(|e| ApiError::bad_request(format!("namespace: {e}")))
}
