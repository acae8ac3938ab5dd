//! Pulsar's token authentication for the web service: `Authorization: Bearer <JWT>`, checked against
//! `tokenSecretKey` (HMAC) or `tokenPublicKey` (`tokenPublicAlg`), the role taken from `tokenAuthClaim`
//! (`sub`), and super-user roles for administration.
//!
//! # Rules
//!
//! | endpoints | `authenticationEnabled=false` | enabled |
//! |---|---|---|
//! | lookups, partition metadata, `/admin/v2/brokers/ready` | anyone | any valid token |
//! | `/metrics` | anyone | anyone, or any valid token with `authenticateMetricsEndpoint=true` |
//! | the OpenAPI document | anyone | anyone |
//! | every other `/admin/v2` and `/loadmgr/v1` endpoint | anyone | any valid token; with `authorizationEnabled=true` a role in `superUserRoles` |
//!
//! A missing, malformed, expired or wrongly signed token is **401**; a valid token whose role may not do what
//! it asks is **403** (Pulsar answers 401 to both); both with `{"reason": ...}`.

use std::collections::BTreeSet;

use axum::http::{HeaderMap, StatusCode};
use base64::Engine;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};

use super::errors::ApiError;
use crate::config::Settings;

/// The one provider loadmgr implements.
pub const TOKEN_PROVIDER: &str =
    "org.apache.pulsar.broker.authentication.AuthenticationProviderToken";

/// What a request may do, checked per endpoint; see the module docs.
#[derive(Clone)]
pub struct Auth {
    tokens: Option<Tokens>,
    authorization: bool,
    super_users: BTreeSet<String>,
    metrics: bool,
}

#[derive(Clone)]
struct Tokens {
    key: DecodingKey,
    validation: Validation,
    claim: String,
    audience: Option<(String, String)>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("enabled", &self.tokens.is_some())
            .field("authorization", &self.authorization)
            .field("super_users", &self.super_users)
            .finish()
    }
}

/// The bytes a key setting names: `data:;base64,<b64>`, `file:///path` (or `file:path`), `env:VAR`, or the key
/// in base64.
pub fn key_bytes(setting: &str, key: &str) -> Result<Vec<u8>, String> {
    let b64 = |text: &str| {
        base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map_err(|e| format!("{key}: not valid base64: {e}"))
    };
    if let Some(data) = setting.strip_prefix("data:") {
        let (_, payload) = data
            .split_once(',')
            .ok_or_else(|| format!("{key}: a data: URL needs a ',' before its content"))?;
        return b64(payload);
    }
    if let Some(path) = setting
        .strip_prefix("file://")
        .or(setting.strip_prefix("file:"))
    {
        return std::fs::read(path).map_err(|e| format!("{key}: cannot read {path}: {e}"));
    }
    if let Some(var) = setting.strip_prefix("env:") {
        let value = std::env::var(var)
            .map_err(|_| format!("{key}: environment variable {var} is not set"))?;
        return b64(&value);
    }
    b64(setting)
}

/// A public key as PEM text: PEM as is, DER (SubjectPublicKeyInfo, as `pulsar tokens create-key-pair`
/// writes it) wrapped into PEM.
fn public_pem(bytes: &[u8]) -> Vec<u8> {
    if bytes.starts_with(b"-----BEGIN") {
        return bytes.to_vec();
    }
    let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
    let mut pem = String::from("-----BEGIN PUBLIC KEY-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        pem.push_str(std::str::from_utf8(chunk).expect("base64 is ASCII"));
        pem.push('\n');
    }
    pem.push_str("-----END PUBLIC KEY-----\n");
    pem.into_bytes()
}

impl Auth {
    /// Authentication off: everything is allowed.
    pub fn disabled() -> Auth {
        Auth {
            tokens: None,
            authorization: false,
            super_users: BTreeSet::new(),
            metrics: false,
        }
    }

    /// The rules `broker.conf` asks for; errors name the key that is wrong.
    pub fn from_settings(s: &Settings) -> Result<Auth, String> {
        if !s.authentication_enabled {
            return Ok(Auth::disabled());
        }
        if !s.authentication_providers.is_empty()
            && !s
                .authentication_providers
                .iter()
                .any(|p| p == TOKEN_PROVIDER)
        {
            return Err(format!(
                "authenticationProviders: loadmgr implements only {TOKEN_PROVIDER}, not {}",
                s.authentication_providers.join(", ")
            ));
        }
        let (key, mut validation) = match (&s.token_secret_key, &s.token_public_key) {
            (Some(secret), None) => {
                let bytes = key_bytes(secret, "tokenSecretKey")?;
                let mut v = Validation::new(Algorithm::HS256);
                v.algorithms = vec![Algorithm::HS256, Algorithm::HS384, Algorithm::HS512];
                (DecodingKey::from_secret(&bytes), v)
            }
            (None, Some(public)) => {
                let alg: Algorithm = s.token_public_alg.parse().map_err(|_| {
                    format!("tokenPublicAlg: unknown algorithm {}", s.token_public_alg)
                })?;
                let pem = public_pem(&key_bytes(public, "tokenPublicKey")?);
                let key = match alg {
                    Algorithm::RS256
                    | Algorithm::RS384
                    | Algorithm::RS512
                    | Algorithm::PS256
                    | Algorithm::PS384
                    | Algorithm::PS512 => DecodingKey::from_rsa_pem(&pem),
                    Algorithm::ES256 | Algorithm::ES384 => DecodingKey::from_ec_pem(&pem),
                    other => {
                        return Err(format!(
                            "tokenPublicAlg: {other:?} needs tokenSecretKey, not a public key"
                        ))
                    }
                }
                .map_err(|e| format!("tokenPublicKey: not a {alg:?} public key: {e}"))?;
                (key, Validation::new(alg))
            }
            (Some(_), Some(_)) => {
                return Err("set tokenSecretKey or tokenPublicKey, not both".into());
            }
            (None, None) => {
                return Err(
                    "authenticationEnabled=true needs tokenSecretKey or tokenPublicKey".into(),
                );
            }
        };
        // Pulsar's tokens need not expire: `exp` is checked when present.
        validation.required_spec_claims.clear();
        validation.validate_aud = false;
        validation.leeway = 0;
        let audience = match (&s.token_audience_claim, &s.token_audience) {
            (Some(claim), Some(aud)) if !claim.is_empty() => Some((claim.clone(), aud.clone())),
            (Some(claim), None) if !claim.is_empty() => {
                return Err("tokenAudienceClaim is set without tokenAudience".into())
            }
            _ => None,
        };
        Ok(Auth {
            tokens: Some(Tokens {
                key,
                validation,
                claim: s.token_auth_claim.clone(),
                audience,
            }),
            authorization: s.authorization_enabled,
            super_users: s.super_user_roles.iter().cloned().collect(),
            metrics: s.authenticate_metrics_endpoint,
        })
    }

    /// Whether tokens are checked at all.
    pub fn enabled(&self) -> bool {
        self.tokens.is_some()
    }

    /// The role of the request's token: `Ok(None)` when authentication is off, 401 when the token is missing
    /// or not valid.
    pub fn role(&self, headers: &HeaderMap) -> Result<Option<String>, ApiError> {
        let Some(t) = &self.tokens else {
            return Ok(None);
        };
        let unauthorized = |why: String| ApiError::new(StatusCode::UNAUTHORIZED, why);
        let header = headers
            .get(axum::http::header::AUTHORIZATION)
            .ok_or_else(|| unauthorized("Authentication required: no Authorization header".into()))?
            .to_str()
            .map_err(|_| {
                unauthorized("Authentication required: the Authorization header is not text".into())
            })?;
        let token = header
            .strip_prefix("Bearer ")
            .ok_or_else(|| {
                unauthorized(
                    "Authentication required: expected 'Authorization: Bearer <token>'".into(),
                )
            })?
            .trim();
        let data = jsonwebtoken::decode::<serde_json::Value>(token, &t.key, &t.validation)
            .map_err(|e| unauthorized(format!("Authentication failed: {e}")))?;
        if let Some((claim, aud)) = &t.audience {
            let ok = match data.claims.get(claim) {
                Some(serde_json::Value::String(a)) => a == aud,
                Some(serde_json::Value::Array(all)) => all.iter().any(|a| a.as_str() == Some(aud)),
                _ => false,
            };
            if !ok {
                return Err(unauthorized(format!(
                    "Authentication failed: the token's {claim} claim does not name {aud}"
                )));
            }
        }
        match data.claims.get(&t.claim) {
            Some(serde_json::Value::String(role)) if !role.is_empty() => Ok(Some(role.clone())),
            _ => Err(unauthorized(format!(
                "Authentication failed: the token has no {} claim",
                t.claim
            ))),
        }
    }

    /// Checks a request for an endpoint any authenticated client may use.
    pub fn client(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        self.role(headers).map(|_| ())
    }

    /// Checks a request for an administration endpoint (see the module docs).
    pub fn admin(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        match self.role(headers)? {
            Some(role) if self.authorization && !self.super_users.contains(&role) => Err(ApiError::new(
                StatusCode::FORBIDDEN,
                format!("This operation requires super-user access; role {role} is not in superUserRoles"),
            )),
            _ => Ok(()),
        }
    }

    /// Checks a scrape of `/metrics`.
    pub fn metrics(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        if self.metrics {
            self.client(headers)
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{encode, EncodingKey, Header};

    fn settings(secret: &str) -> Settings {
        let mut s = Settings::default();
        s.authentication_enabled = true;
        s.authorization_enabled = true;
        s.authentication_providers = vec![TOKEN_PROVIDER.into()];
        s.token_secret_key = Some(format!(
            "data:;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(secret)
        ));
        s.super_user_roles = vec!["admin".into()];
        s
    }

    fn headers(token: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            axum::http::header::AUTHORIZATION,
            format!("Bearer {token}").parse().unwrap(),
        );
        h
    }

    fn token(secret: &str, claims: serde_json::Value) -> String {
        encode(
            &Header::default(),
            &claims,
            &EncodingKey::from_secret(secret.as_bytes()),
        )
        .unwrap()
    }

    #[test]
    fn roles_come_from_valid_tokens_and_admin_needs_a_super_user() {
        let auth = Auth::from_settings(&settings("k3y")).unwrap();
        let admin = headers(&token("k3y", serde_json::json!({"sub": "admin"})));
        let client = headers(&token("k3y", serde_json::json!({"sub": "app"})));
        assert_eq!(auth.role(&admin).unwrap().as_deref(), Some("admin"));
        auth.admin(&admin).unwrap();
        auth.client(&client).unwrap();
        assert_eq!(
            auth.admin(&client).unwrap_err().status,
            StatusCode::FORBIDDEN
        );
        // Missing, foreign, expired, garbage: 401.
        for h in [
            HeaderMap::new(),
            headers(&token("other", serde_json::json!({"sub": "admin"}))),
            headers(&token("k3y", serde_json::json!({"sub": "admin", "exp": 1}))),
            headers("not.a.token"),
            headers(&token("k3y", serde_json::json!({"role": "admin"}))),
        ] {
            assert_eq!(
                auth.client(&h).unwrap_err().status,
                StatusCode::UNAUTHORIZED
            );
        }
        // Metrics are open by default.
        auth.metrics(&HeaderMap::new()).unwrap();
        assert!(!Auth::disabled().enabled());
        Auth::disabled().admin(&HeaderMap::new()).unwrap();
    }

    #[test]
    fn key_settings_take_pulsars_forms_and_bad_ones_are_named() {
        assert_eq!(key_bytes("data:;base64,aGk=", "k").unwrap(), b"hi");
        assert_eq!(key_bytes("aGk=", "k").unwrap(), b"hi");
        assert!(key_bytes("file:///no/such", "tokenSecretKey")
            .unwrap_err()
            .starts_with("tokenSecretKey: cannot read /no/such"));
        let mut s = settings("x");
        s.token_secret_key = None;
        assert!(Auth::from_settings(&s)
            .unwrap_err()
            .contains("needs tokenSecretKey or tokenPublicKey"));
        let mut s = settings("x");
        s.authentication_providers = vec!["org.example.Other".into()];
        assert!(Auth::from_settings(&s)
            .unwrap_err()
            .contains("implements only"));
    }
}
