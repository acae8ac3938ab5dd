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
//! | the OpenAPI document, the dashboard's files (`/`, `/dashboard...`; they hold no data) | anyone | anyone |
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

    /// Test keys, made with `openssl genpkey` for this test only.
    const RSA_PRIVATE: &str = "-----BEGIN PRIVATE KEY-----\nMIIEvgIBADANBgkqhkiG9w0BAQEFAASCBKgwggSkAgEAAoIBAQC5+sE8eMP3KFE2\nivsjXN1rRWef7/mxnlc9Qf2eo5gUDBPJDxy33CxDdfQ15+tpQRmoHXh0iA/trPMw\ndJIqB3w8e9xxLn5Em3vaTmvZoUL6leR9NSX+dgRtkgTeDu34RF1ukbunrjdu1mY3\nmtdNLt2k0WqVhZV7es+68ineENIMsIS+Mf9tHm8b6lnQO0oZ9p9iFWNl2pS1fgYE\nP8W/C97wq/HERdbXKtMjqZ0B80w5U/Xv5quF3NzuQKEhD6n8TLEpq1PtnzRILPe6\ny2t/taqwbKapw8C+DrMnvHAueCPDD4vMi9L/r6nG2oCysx5jL49XYGhff92y6K21\ncvDKXn3pAgMBAAECggEACBtBnUHL0+wAVzrpXbYcaiK3NLncdcUnuxIzbHznwfbx\nTVYg67Q3gzTC4W8jnB3D8Segsp6kKBld686m+NlE7Wt+NTpAM3weAsrgiVbNwTez\noxAEIRJymLaQyv+WWJgdRPap+fH+dVC32aRgjlsUuuyMY2pUVNKqd5T65XSw/S/I\n2EW41a/SEGIrkUzqowKaB7yac88j2g3z07Usq7QDJOff1KPjF8EUqFs+HoIly9d1\nB6MLqaJBF9KgyFlU9AeRvg4ezpehnYYZQmo4hfSwWr1y+70WEspTEN7uZOKHZo6Z\nbnI5Fp41ZIvWrau+6/PX/8UdkDBYnBU+zjKdTF4kcQKBgQD4oFoKyvWRgiL5XJ9w\nbIAg0mOjM6FDQwCseBv/glbM1OG82iyCLCKh1HrrS5DQSUULXrHiHwr8D/gYel+N\nRYbqyRZ7ZEpxeaH6ov21a0cHA7NDLgcPlU8YK4hIs24shhYhEsT6HTHbBkh9uqkI\n+BbRDozibeQhK3mLgqfHD2H5EQKBgQC/fsTNPnszUp/7zdH2NFvXVFhgDpfZT3ed\nIElVn3WOxafiiI33wcpJcbGO+Y/QWJKp5pHzFznEody3TGaIVUSf7pRXyJ3s20WL\nVcwgSBlualjrSogSDn0lO/0EOM7nzicQ8tN4AzsTf6gA4m0frD8MIN6bE7/CAIHo\nMC30Pgh3WQKBgQChl37OUvlmWEGo9tU9uZdRPcy6jtz6HXs7nVj9KVaHDLmnB9oz\nxMHBkptNgLCfX2+7oxFUWT7Hcw2ZwzeFVzIIOSgejKGBvT9U6kiheBcS7Qm+2RSH\nwVBF8k1CizRJReDuIAfcU8tKgnvtE7u3c59Iwv84T5odIOd/kCzByTKxMQKBgQCt\ndgKFPHTTD6Q1rsHjOJh83D1VfcKVKYPbQ9TKB7CwTGEANdwLsnIvxxokvfFEtAbe\neip4vfApKsnJDB7QnhSUnsOnJOXRGOrNBUHreAP5XcIAGLpbSN6ZrNZLTb42gion\nEx71Vk/cIMWpT3GzwA44SUn7xY7tCBKkpYfq94opuQKBgBuzqtBn64QnG8YhBbpN\ngZkjAvN+hR9rBM/mYKxdWH/8UnJhe9PvsJZJkomWstbM0YhwPENdrWV0k/t5AXiW\nLc5Ik/tyhz+9cIzg5ZkX0EvN1bsyTpiKMAl7/FpNd62fJ3Yxemt4Q9fLCk9gOce9\nDph5DgmZWQFux9hnCggBfXWv\n-----END PRIVATE KEY-----\n";
    const RSA_PUBLIC: &str = "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAufrBPHjD9yhRNor7I1zd\na0Vnn+/5sZ5XPUH9nqOYFAwTyQ8ct9wsQ3X0NefraUEZqB14dIgP7azzMHSSKgd8\nPHvccS5+RJt72k5r2aFC+pXkfTUl/nYEbZIE3g7t+ERdbpG7p643btZmN5rXTS7d\npNFqlYWVe3rPuvIp3hDSDLCEvjH/bR5vG+pZ0DtKGfafYhVjZdqUtX4GBD/Fvwve\n8KvxxEXW1yrTI6mdAfNMOVP17+arhdzc7kChIQ+p/EyxKatT7Z80SCz3ustrf7Wq\nsGymqcPAvg6zJ7xwLngjww+LzIvS/6+pxtqAsrMeYy+PV2BoX3/dsuittXLwyl59\n6QIDAQAB\n-----END PUBLIC KEY-----\n";
    const EC_PRIVATE: &str = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgZjKcJX6ixTU5Pwjc\ndRZZqNJGQCMj2FPlhdP1+/WX6TChRANCAATH43K+H3JSnjMhE5j0yOtsf1BonT3J\nsRdc440LzoXZolHqtjHfwQ5+NTggNfYUtNr5lu9WZ8xJof1VP3JMbgWu\n-----END PRIVATE KEY-----\n";
    /// The EC public key as `pulsar tokens create-key-pair` writes it: DER, here base64-encoded.
    const EC_PUBLIC_DER_B64: &str = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEx+Nyvh9yUp4zIROY9MjrbH9QaJ09ybEXXOONC86F2aJR6rYx38EOfjU4IDX2FLTa+ZbvVmfMSaH9VT9yTG4Frg==";

    #[test]
    fn public_keys_verify_rs256_pem_and_es256_der_tokens() {
        let cases = [
            (
                "RS256",
                format!(
                    "data:;base64,{}",
                    base64::engine::general_purpose::STANDARD.encode(RSA_PUBLIC)
                ),
                Algorithm::RS256,
                EncodingKey::from_rsa_pem(RSA_PRIVATE.as_bytes()).unwrap(),
            ),
            (
                "ES256",
                format!("data:;base64,{EC_PUBLIC_DER_B64}"),
                Algorithm::ES256,
                EncodingKey::from_ec_pem(EC_PRIVATE.as_bytes()).unwrap(),
            ),
        ];
        for (alg, public, algorithm, private) in cases {
            let mut s = settings("unused");
            s.token_secret_key = None;
            s.token_public_key = Some(public);
            s.token_public_alg = alg.into();
            let auth = Auth::from_settings(&s).unwrap();
            let signed = |claims: serde_json::Value| {
                encode(&Header::new(algorithm), &claims, &private).unwrap()
            };
            let admin = headers(&signed(serde_json::json!({"sub": "admin"})));
            auth.admin(&admin).unwrap();
            let expired = headers(&signed(serde_json::json!({"sub": "admin", "exp": 1})));
            assert_eq!(
                auth.client(&expired).unwrap_err().status,
                StatusCode::UNAUTHORIZED,
                "{alg}"
            );
            // An HMAC token signed with the public key's text must not pass (algorithm confusion).
            let confused = headers(&token(
                &s.token_public_key.clone().unwrap(),
                serde_json::json!({"sub": "admin"}),
            ));
            assert_eq!(
                auth.client(&confused).unwrap_err().status,
                StatusCode::UNAUTHORIZED,
                "{alg}"
            );
        }
    }
}
