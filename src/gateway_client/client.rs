//! The client side: how commands reach a running gateway. It is found
//! only through `gateway.json` ([`super::discovery::running`]) and spoken to
//! over plain HTTP/1.1 on its address with its token, one blocking
//! request per connection ([`super::exchange`]).

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::discovery::{self, GatewayInfo};
use super::exchange;
use crate::config::Config;
use crate::host::Host;
use crate::paths::Paths;

/// A command needs the gateway and none runs.
#[derive(Debug, thiserror::Error)]
#[error("gateway not running (start it with `almanac gateway run`)")]
pub(crate) struct NotRunning;

/// The gateway answered with an error.
#[derive(Debug, thiserror::Error)]
#[error("the gateway answered {status}: {message}")]
pub(crate) struct Refused {
    pub status: u16,
    pub message: String,
}

/// A running gateway, ready to be asked.
#[derive(Debug, Clone)]
pub(crate) struct Client {
    pub info: GatewayInfo,
    token: String,
}

impl Client {
    /// The gateway of the state directory of `paths`, if one runs.
    pub(crate) fn find(
        paths: &Paths,
        config: &Config,
        host: &Host,
    ) -> anyhow::Result<Option<Client>> {
        let Some(info) = discovery::running(paths) else {
            return Ok(None);
        };
        let token = discovery::token(paths, config, host, false)?
            .map(|(t, _)| t)
            .unwrap_or_default();
        Ok(Some(Client { info, token }))
    }

    /// [`Client::find`], or [`NotRunning`].
    pub(crate) fn require(paths: &Paths, config: &Config, host: &Host) -> anyhow::Result<Client> {
        Client::find(paths, config, host)?.ok_or_else(|| NotRunning.into())
    }

    /// `GET path` → the JSON answer.
    pub(crate) fn get(&self, path: &str) -> anyhow::Result<Value> {
        let body = self.call("GET", path, None, Duration::from_secs(10))?;
        Ok(value_of(&body))
    }

    /// `POST path` with a JSON body → the JSON answer; `limit` bounds the
    /// wait (a turn can take minutes).
    pub(crate) fn post<B: Serialize + ?Sized>(
        &self,
        path: &str,
        body: &B,
        limit: Duration,
    ) -> anyhow::Result<Value> {
        let body = self.call("POST", path, Some(serde_json::to_vec(body)?), limit)?;
        Ok(value_of(&body))
    }

    /// [`Client::post`], the answer read straight into `T`.
    pub(crate) fn post_for<T: DeserializeOwned, B: Serialize + ?Sized>(
        &self,
        path: &str,
        body: &B,
        limit: Duration,
    ) -> anyhow::Result<T> {
        let body = self.call("POST", path, Some(serde_json::to_vec(body)?), limit)?;
        serde_json::from_slice(&body)
            .map_err(|e| anyhow::anyhow!("the gateway's answer to {path} is not understood: {e}"))
    }

    /// One request; the body of a 2xx answer, else [`Refused`].
    fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
        limit: Duration,
    ) -> anyhow::Result<Vec<u8>> {
        // A path goes on the request line as it is: it must be one token.
        if !path.starts_with('/') || path.bytes().any(|b| b <= b' ' || b == 0x7f) {
            anyhow::bail!("not a request path: {path:?}");
        }
        let base = self.info.base_url();
        let authority = base.trim_start_matches("http://");
        let body = body.unwrap_or_default();
        let mut request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.token,
            body.len()
        )
        .into_bytes();
        request.extend_from_slice(&body);
        let answer = exchange::exchange(socket_of(&self.info), &base, &request, limit)?;
        if !(200..300).contains(&answer.status) {
            let value = value_of(&answer.body);
            let message = value["error"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| value.to_string());
            return Err(Refused {
                status: answer.status,
                message,
            }
            .into());
        }
        Ok(answer.body)
    }
}

/// `text` as one segment of a request path (an id, a lookup, a session
/// key): every byte but letters and digits percent-encoded.
pub(crate) fn path_segment(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// An answer's body as JSON; one that is not JSON as its text.
fn value_of(body: &[u8]) -> Value {
    serde_json::from_slice(body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()))
}

fn socket_of(info: &GatewayInfo) -> std::net::SocketAddr {
    let ip: std::net::IpAddr = match info.address.as_str() {
        "0.0.0.0" => std::net::Ipv4Addr::LOCALHOST.into(),
        "::" => std::net::Ipv6Addr::LOCALHOST.into(),
        a => a.parse().unwrap_or(std::net::Ipv4Addr::LOCALHOST.into()),
    };
    std::net::SocketAddr::new(ip, info.port)
}

#[cfg(test)]
#[path = "client_tests.rs"]
mod tests;
