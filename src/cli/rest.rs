//! The REST client of `loadmgr admin --url` and `loadmgr health`: a broker's web service, with a token and a
//! trusted CA as `pulsar-admin --admin-url` takes them.

use std::path::PathBuf;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;

use super::CliError;

/// Where the web service is and how to talk to it.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RestArgs {
    /// A broker's web service, e.g. http://broker:8080 or https://broker:8443 (REST, as pulsar-admin's
    /// --admin-url).
    #[arg(long)]
    pub url: Option<String>,
    /// A token (JWT) sent as `Authorization: Bearer`.
    #[arg(long, conflicts_with = "auth_token_file")]
    pub auth_token: Option<String>,
    /// A file holding the token.
    #[arg(long)]
    pub auth_token_file: Option<PathBuf>,
    /// CA certificates (PEM) to trust for an https:// URL (the system's roots are not used).
    #[arg(long)]
    pub tls_trust_certs: Option<PathBuf>,
}

/// A client of one web service.
#[derive(Debug, Clone)]
pub struct Rest {
    client: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl Rest {
    /// A client for `args.url` (which must be set), with `timeout` per request.
    pub fn new(args: &RestArgs, timeout: Duration) -> Result<Rest, CliError> {
        let base = args
            .url
            .clone()
            .ok_or_else(|| CliError::new("give --url http(s)://broker:port"))?;
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(CliError::new(format!(
                "--url {base}: expected http:// or https://"
            )));
        }
        let token = match (&args.auth_token, &args.auth_token_file) {
            (Some(t), _) => Some(t.trim().to_owned()),
            (None, Some(f)) => Some(
                std::fs::read_to_string(f)
                    .map_err(|e| CliError::new(format!("--auth-token-file {}: {e}", f.display())))?
                    .trim()
                    .to_owned(),
            ),
            (None, None) => None,
        };
        let mut builder = reqwest::Client::builder()
            .use_rustls_tls()
            .timeout(timeout)
            .redirect(reqwest::redirect::Policy::limited(5));
        if let Some(path) = &args.tls_trust_certs {
            let pem = std::fs::read(path)
                .map_err(|e| CliError::new(format!("--tls-trust-certs {}: {e}", path.display())))?;
            for cert in reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| CliError::new(format!("--tls-trust-certs {}: {e}", path.display())))?
            {
                builder = builder.add_root_certificate(cert);
            }
        }
        Ok(Rest {
            client: builder
                .build()
                .map_err(|e| CliError::new(format!("HTTP client: {e}")))?,
            base: base.trim_end_matches('/').to_owned(),
            token,
        })
    }

    /// The web service's address.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Sends a request; the status and body of a 2xx answer, or an error naming the status and the reason.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> Result<(StatusCode, Vec<u8>), CliError> {
        let url = format!("{}{path}", self.base);
        let mut request = self.client.request(method.clone(), &url);
        if let Some(t) = &self.token {
            request = request.bearer_auth(t);
        }
        if let Some(b) = body {
            request = request.json(&b);
        }
        let response = request
            .send()
            .await
            .map_err(|e| CliError::new(format!("{method} {url}: {e}")))?;
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| CliError::new(format!("{method} {url}: reading the answer: {e}")))?
            .to_vec();
        if status.is_success() {
            return Ok((status, bytes));
        }
        let reason = serde_json::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .and_then(|v| v.get("reason").and_then(|r| r.as_str()).map(str::to_owned))
            .unwrap_or_else(|| String::from_utf8_lossy(&bytes).into_owned());
        Err(CliError::new(format!("{method} {url}: {status}: {reason}")))
    }

    /// GETs `path` and decodes its JSON.
    pub async fn get_json<T: DeserializeOwned>(&self, path: &str) -> Result<T, CliError> {
        let (_, body) = self.send(Method::GET, path, None).await?;
        serde_json::from_slice(&body).map_err(|e| {
            CliError::new(format!(
                "GET {}{path}: not the expected JSON: {e}",
                self.base
            ))
        })
    }
}
