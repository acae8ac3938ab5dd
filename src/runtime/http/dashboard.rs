//! The dashboard's page, script and style sheet (`/dashboard`, embedded in the binary; `/` redirects to it).
//!
//! The files hold no cluster data, so they are served to anyone, like the OpenAPI document; the page fetches
//! everything it shows from the `/loadmgr/v1` endpoints with the token it is given, under the same rules as
//! any other client ([`super::auth`]). The page runs no inline script or style: the responses carry a
//! Content-Security-Policy that allows only this origin's files.

use axum::http::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE};
use axum::http::{HeaderName, HeaderValue};
use axum::response::{IntoResponse, Redirect, Response};

const INDEX: &str = include_str!("dashboard/index.html");
const SCRIPT: &str = include_str!("dashboard/app.js");
const STYLE: &str = include_str!("dashboard/style.css");

/// Scripts, styles, data and images from this origin only; no frames, no plugins, no form posts elsewhere.
const POLICY: &str =
    "default-src 'self'; img-src 'self' data:; object-src 'none'; frame-ancestors 'none'; \
                      base-uri 'none'; form-action 'self'";

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (CONTENT_SECURITY_POLICY, HeaderValue::from_static(POLICY)),
            (CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (
                HeaderName::from_static("x-content-type-options"),
                HeaderValue::from_static("nosniff"),
            ),
        ],
        body,
    )
        .into_response()
}

/// The page.
pub(crate) async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX)
}

/// Its script.
pub(crate) async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

/// Its style sheet.
pub(crate) async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}

/// Whether the page must ask for a token before it asks for data (`{"tokenNeeded": bool}`), so that a
/// browser's first requests are not refused.
pub(crate) async fn auth_info(
    axum::extract::State(state): axum::extract::State<super::AppState>,
) -> Response {
    (
        [(CACHE_CONTROL, HeaderValue::from_static("no-cache"))],
        axum::Json(serde_json::json!({ "tokenNeeded": state.auth.enabled() })),
    )
        .into_response()
}

/// `/` → `/dashboard`.
pub(crate) async fn root() -> Redirect {
    Redirect::temporary("/dashboard")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The page loads only its own files and every element the script looks up exists.
    #[test]
    fn the_page_names_every_element_the_script_uses() {
        assert!(INDEX.contains(r#"src="/dashboard/app.js""#));
        assert!(INDEX.contains(r#"href="/dashboard/style.css""#));
        assert!(
            !INDEX.contains("<script>"),
            "no inline script (the policy forbids it)"
        );
        assert!(
            !INDEX.contains("style="),
            "no inline style (the policy forbids it)"
        );
        let mut rest = SCRIPT;
        let mut ids = Vec::new();
        while let Some(i) = rest.find("$(\"") {
            rest = &rest[i + 3..];
            let end = rest.find('"').unwrap();
            ids.push(&rest[..end]);
        }
        assert!(ids.len() > 10, "{ids:?}");
        for id in ids {
            assert!(INDEX.contains(&format!("id=\"{id}\"")), "no element #{id}");
        }
    }
}
