//! Errors of the web service as Pulsar's REST API returns them: a status and a JSON body
//! `{"reason": "..."}` (Pulsar's `ErrorData`), never a crash and never an empty 500.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::runtime::RuntimeError;

/// An error body (Pulsar's `ErrorData`).
#[derive(Debug, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// What was wrong.
    pub reason: String,
}

/// A refused request: its status and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// What was wrong, for people.
    pub reason: String,
}

impl ApiError {
    /// `status` with `reason`.
    pub fn new(status: StatusCode, reason: impl Into<String>) -> ApiError {
        ApiError {
            status,
            reason: reason.into(),
        }
    }

    /// 400: a malformed path segment, query or body.
    pub fn bad_request(reason: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, reason)
    }

    /// 404: the namespace, bundle, broker or topic does not exist.
    pub fn not_found(reason: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, reason)
    }

    /// 412: well-formed but not allowed now (Pulsar's answer to invalid admin values).
    pub fn precondition(reason: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::PRECONDITION_FAILED, reason)
    }

    /// 503: the store, the leader or the broker is not available now; retrying may work.
    pub fn unavailable(reason: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, reason)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(serde_json::json!({ "reason": self.reason })),
        )
            .into_response()
    }
}

impl From<RuntimeError> for ApiError {
    fn from(e: RuntimeError) -> ApiError {
        let reason = e.to_string();
        match e {
            RuntimeError::Invalid(_) | RuntimeError::Config(_) | RuntimeError::Rejected { .. } => {
                ApiError::precondition(reason)
            }
            RuntimeError::NoLeader { .. } | RuntimeError::Timeout { .. } => {
                ApiError::unavailable(reason)
            }
            RuntimeError::Store(s) if s.is_transient() => ApiError::unavailable(reason),
            _ => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, reason),
        }
    }
}

impl From<crate::store::Error> for ApiError {
    fn from(e: crate::store::Error) -> ApiError {
        ApiError::from(RuntimeError::Store(e))
    }
}
