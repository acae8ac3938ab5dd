//! TLS for the web service (`webServicePortTls` with `tlsCertificateFilePath` and `tlsKeyFilePath`), and the
//! trust of the HTTP client a broker uses to reach another broker (`tlsTrustCertsFilePath`).

use std::path::Path;
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls;

/// A server configuration from PEM files; errors name the file and what is wrong.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| format!("tlsCertificateFilePath {}: {e}", cert.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("tlsCertificateFilePath {}: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "tlsCertificateFilePath {}: no certificate in the file",
            cert.display()
        ));
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("tlsKeyFilePath {}: {e}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("tlsCertificateFilePath/tlsKeyFilePath: {e}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The HTTP client brokers use to reach each other: it trusts the CA certificates of
/// `tlsTrustCertsFilePath` (and nothing else) for `https://` URLs.
pub fn http_client(trust: Option<&Path>) -> Result<reqwest::Client, String> {
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .timeout(std::time::Duration::from_secs(60))
        .redirect(reqwest::redirect::Policy::none());
    if let Some(path) = trust {
        let pem = std::fs::read(path)
            .map_err(|e| format!("tlsTrustCertsFilePath {}: cannot read: {e}", path.display()))?;
        for cert in reqwest::Certificate::from_pem_bundle(&pem)
            .map_err(|e| format!("tlsTrustCertsFilePath {}: {e}", path.display()))?
        {
            builder = builder.add_root_certificate(cert);
        }
    }
    builder.build().map_err(|e| format!("HTTP client: {e}"))
}
