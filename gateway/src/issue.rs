//! Minting upstream: an OAuth 2.0 refresh (RFC 6749 §6) or a GitHub App
//! installation token. Called only under the refresh lease.
//!
//! Upstream bodies are parsed for the token and dropped; an error body
//! contributes at most its RFC 6749 error code.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, TimeDelta, Utc};
use patchpilot_model::broker::ConnectionName;
use ring::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
use rustls::pki_types::PrivateKeyDer;
use rustls::pki_types::pem::PemObject as _;
use serde::Deserialize;

use crate::Error;
use crate::error::oauth_code;
use crate::secrets::{CachedToken, GithubApp, OauthRefresh, Secret};

/// How long before its expiry a token stops being served: five minutes, or
/// half its lifetime when that is shorter.
pub const REFRESH_MARGIN: Duration = Duration::from_secs(300);

/// The lifetime assumed for an OAuth access token whose response has no
/// `expires_in`.
pub const DEFAULT_OAUTH_LIFETIME: Duration = Duration::from_secs(600);

/// The permissions asked for on every GitHub App installation token:
/// read-only, whatever the App itself may do.
pub const GITHUB_PERMISSIONS: [(&str, &str); 3] =
    [("contents", "read"), ("metadata", "read"), ("pull_requests", "read")];

/// What a mint produced: the token to cache and, when the provider rotated
/// the refresh token, the secret to store in place of the old one.
#[derive(Debug)]
pub(crate) struct Minted {
    pub token: CachedToken,
    pub secret: Option<Secret>,
}

/// The cache entry for a token that expires at `expires_at`.
pub(crate) fn cache_entry(
    access_token: String,
    expires_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> CachedToken {
    let lifetime = (expires_at - now).max(TimeDelta::zero());
    let margin = TimeDelta::from_std(REFRESH_MARGIN).unwrap_or(TimeDelta::MAX).min(lifetime / 2);
    CachedToken { access_token, expires_at, refresh_after: expires_at - margin }
}

/// Parses an RSA private key PEM (PKCS#1 or PKCS#8).
pub(crate) fn rsa_key(pem: &str) -> Option<RsaKeyPair> {
    match PrivateKeyDer::from_pem_slice(pem.as_bytes()).ok()? {
        PrivateKeyDer::Pkcs1(der) => RsaKeyPair::from_der(der.secret_pkcs1_der()).ok(),
        PrivateKeyDer::Pkcs8(der) => RsaKeyPair::from_pkcs8(der.secret_pkcs8_der()).ok(),
        _ => None,
    }
}

#[derive(Deserialize)]
struct OauthTokenResponse {
    access_token: String,
    #[serde(default)]
    expires_in: Option<u64>,
    #[serde(default)]
    refresh_token: Option<String>,
}

#[derive(Deserialize)]
struct OauthErrorResponse {
    error: String,
}

/// Refreshes an OAuth grant: `grant_type=refresh_token` form POST, the
/// client authenticated with HTTP Basic when it has a secret.
pub(crate) async fn oauth_refresh(
    http: &reqwest::Client,
    connection: &ConnectionName,
    grant: &OauthRefresh,
) -> Result<Minted, Error> {
    let url = grant.token_url.clone();
    let mut form: Vec<(&str, &str)> =
        vec![("grant_type", "refresh_token"), ("refresh_token", grant.refresh_token.as_str())];
    if let Some(scope) = &grant.scope {
        form.push(("scope", scope));
    }
    let mut request = http.post(&url).header(reqwest::header::ACCEPT, "application/json");
    match &grant.client_secret {
        Some(secret) => request = request.basic_auth(&grant.client_id, Some(secret)),
        None => form.push(("client_id", &grant.client_id)),
    }
    let now = Utc::now();
    let (status, body) = send(request.form(&form), connection, &url).await?;
    if !status.is_success() {
        let code =
            serde_json::from_slice::<OauthErrorResponse>(&body).ok().and_then(|e| oauth_code(&e.error));
        return Err(Error::Upstream { connection: connection.clone(), url, status: status.as_u16(), code });
    }
    let parsed: OauthTokenResponse = serde_json::from_slice(&body).map_err(|_| Error::UpstreamBody {
        connection: connection.clone(),
        url: url.clone(),
        what: "an OAuth token response",
    })?;
    if parsed.access_token.is_empty() {
        return Err(Error::UpstreamBody {
            connection: connection.clone(),
            url,
            what: "an OAuth token response",
        });
    }
    let lifetime = parsed.expires_in.map(Duration::from_secs).unwrap_or(DEFAULT_OAUTH_LIFETIME);
    let expires_at = now + TimeDelta::from_std(lifetime).unwrap_or(TimeDelta::MAX);
    let secret = parsed
        .refresh_token
        .filter(|r| !r.is_empty() && *r != grant.refresh_token)
        .map(|refresh_token| Secret::OauthRefresh(OauthRefresh { refresh_token, ..grant.clone() }));
    Ok(Minted { token: cache_entry(parsed.access_token, expires_at, now), secret })
}

/// The RS256 JWT a GitHub App authenticates with: `iat` a minute in the
/// past (clock drift), `exp` nine minutes ahead (GitHub allows ten).
pub(crate) fn github_jwt(
    connection: &ConnectionName,
    app: &GithubApp,
    now: DateTime<Utc>,
) -> Result<String, Error> {
    let sign = || Error::Sign { connection: connection.clone() };
    let key = rsa_key(&app.private_key_pem).ok_or_else(sign)?;
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"RS256","typ":"JWT"}"#);
    let claims = serde_json::json!({
        "iat": now.timestamp() - 60,
        "exp": now.timestamp() + 540,
        "iss": app.app_id.to_string(),
    });
    let claims = URL_SAFE_NO_PAD.encode(claims.to_string());
    let input = format!("{header}.{claims}");
    let mut signature = vec![0; key.public().modulus_len()];
    key.sign(&RSA_PKCS1_SHA256, &ring::rand::SystemRandom::new(), input.as_bytes(), &mut signature)
        .map_err(|_| sign())?;
    Ok(format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature)))
}

#[derive(Deserialize)]
struct InstallationToken {
    token: String,
    expires_at: DateTime<Utc>,
}

/// Mints a read-only installation token:
/// `POST {api}/app/installations/{id}/access_tokens` with the App's JWT.
pub(crate) async fn github_installation_token(
    http: &reqwest::Client,
    connection: &ConnectionName,
    app: &GithubApp,
) -> Result<Minted, Error> {
    let now = Utc::now();
    let jwt = github_jwt(connection, app, now)?;
    let url = format!(
        "{}/app/installations/{}/access_tokens",
        app.api_url.trim_end_matches('/'),
        app.installation_id
    );
    let permissions: serde_json::Map<String, serde_json::Value> =
        GITHUB_PERMISSIONS.iter().map(|(k, v)| ((*k).to_owned(), (*v).into())).collect();
    let request = http
        .post(&url)
        .bearer_auth(jwt)
        .header(reqwest::header::ACCEPT, "application/vnd.github+json")
        .header("X-GitHub-Api-Version", "2022-11-28")
        .header(reqwest::header::USER_AGENT, "patchpilot-gateway")
        .json(&serde_json::json!({ "permissions": permissions }));
    let (status, body) = send(request, connection, &url).await?;
    if !status.is_success() {
        return Err(Error::Upstream {
            connection: connection.clone(),
            url,
            status: status.as_u16(),
            code: None,
        });
    }
    let parsed: InstallationToken = serde_json::from_slice(&body).map_err(|_| Error::UpstreamBody {
        connection: connection.clone(),
        url: url.clone(),
        what: "an installation token",
    })?;
    Ok(Minted { token: cache_entry(parsed.token, parsed.expires_at, now), secret: None })
}

/// Sends `request` and reads the whole answer; a transport failure names
/// the connection and the URL (never a body).
async fn send(
    request: reqwest::RequestBuilder,
    connection: &ConnectionName,
    url: &str,
) -> Result<(reqwest::StatusCode, Vec<u8>), Error> {
    let transport = |source| Error::Transport { connection: connection.clone(), url: url.to_owned(), source };
    let response = request.send().await.map_err(transport)?;
    let status = response.status();
    let body = response.bytes().await.map_err(transport)?;
    Ok((status, body.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_served_until_five_minutes_or_half_its_life_before_expiry() {
        let now = Utc::now();
        let hour = cache_entry("t".into(), now + TimeDelta::hours(1), now);
        assert_eq!(hour.refresh_after, now + TimeDelta::minutes(55));
        let short = cache_entry("t".into(), now + TimeDelta::minutes(4), now);
        assert_eq!(short.refresh_after, now + TimeDelta::minutes(2));
    }
}
